import { BlockList, isIP } from "node:net";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthEndpoint } from "better-auth/api";
import { setSessionCookie } from "better-auth/cookies";
import { secretsEqual } from "../../crypto/secrets.js";
import { PEER_IP_HEADER } from "./internal-headers.js";

export interface EdgeSsoOptions {
  /** Addresses or CIDRs of the reverse proxies allowed to assert identity headers. */
  trustedProxies?: string[];
  /** Shared secret the proxy sends in `X-Edge-Secret`. */
  secret?: string;
  /** Create a user on first sign-in when no user has the asserted email. */
  provision?: boolean;
  /** Header with the authenticated principal (Kerberos/SPNEGO user or certificate subject). */
  userHeader?: string;
  /** Header with the user's email, used to find the user. */
  emailHeader?: string;
}

const EDGE_SECRET_HEADER = "x-edge-secret";
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * Edge SSO: a reverse proxy terminates Kerberos/SPNEGO or smartcard mTLS and asserts who the user
 * is in headers. Those headers mean something only when the request provably comes from that proxy
 * (its address, its shared secret, or both when both are configured); with neither configured the
 * endpoint refuses everyone.
 */
export function edgeSso(options: EdgeSsoOptions): BetterAuthPlugin {
  const proxies = buildBlockList(options.trustedProxies ?? []);
  const userHeader = (options.userHeader ?? "x-remote-user").toLowerCase();
  const emailHeader = (options.emailHeader ?? "x-remote-email").toLowerCase();

  const fromTrustedProxy = (headers: Headers): boolean => {
    if (!proxies && options.secret === undefined) return false;
    if (proxies && !addressIn(proxies, headers.get(PEER_IP_HEADER))) return false;
    if (options.secret !== undefined) {
      const presented = headers.get(EDGE_SECRET_HEADER);
      if (presented === null || !secretsEqual(presented, options.secret)) return false;
    }
    return true;
  };

  return {
    id: "tether-edge-sso",
    endpoints: {
      edgeSignIn: createAuthEndpoint("/edge/sign-in", { method: "POST", requireHeaders: true }, async (ctx) => {
        if (!fromTrustedProxy(ctx.headers)) {
          throw new APIError("FORBIDDEN", {
            code: "EDGE_UNTRUSTED",
            message: "Edge sign-in is accepted only from the configured reverse proxy",
          });
        }
        const email = ctx.headers.get(emailHeader)?.trim().toLowerCase() ?? "";
        const principal = ctx.headers.get(userHeader)?.trim() ?? "";
        if (!EMAIL_PATTERN.test(email) || email.length > 254) {
          throw new APIError("BAD_REQUEST", {
            code: "EDGE_NO_IDENTITY",
            message: `The proxy sent no usable email in ${emailHeader}`,
          });
        }
        const internal = ctx.context.internalAdapter;
        let user = (await internal.findUserByEmail(email))?.user ?? null;
        if (!user) {
          if (!options.provision) {
            throw new APIError("FORBIDDEN", { code: "EDGE_UNKNOWN_USER", message: "No account exists for this identity" });
          }
          user = await internal.createUser(
            {
              email,
              name: principal.slice(0, 200) || email.split("@")[0]!,
              emailVerified: true,
            },
            { method: "edge-sso" },
          );
        }
        if ((user as { deactivatedAt?: Date | null }).deactivatedAt) {
          throw new APIError("FORBIDDEN", { code: "ACCOUNT_DEACTIVATED", message: "This account is deactivated" });
        }
        const session = await internal.createSession(user.id, false);
        await setSessionCookie(ctx, { session, user });
        return ctx.json({ user: { id: user.id, email: user.email, name: user.name } });
      }),
    },
  } satisfies BetterAuthPlugin;
}

function buildBlockList(entries: string[]): BlockList | undefined {
  if (entries.length === 0) return undefined;
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split("/") as [string, string | undefined];
    const type = isIP(address) === 6 ? "ipv6" : "ipv4";
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

function addressIn(list: BlockList, raw: string | null): boolean {
  if (!raw) return false;
  // Node reports IPv4 peers on a dual-stack socket as IPv4-mapped IPv6.
  const address = raw.startsWith("::ffff:") && isIP(raw.slice(7)) === 4 ? raw.slice(7) : raw;
  const family = isIP(address);
  if (family === 0) return false;
  return list.check(address, family === 6 ? "ipv6" : "ipv4");
}
