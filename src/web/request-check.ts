import { BlockList, isIP } from "node:net";

/**
 * What the `/device` approval page can tell the owner about a pending request beyond what the device says: where
 * it came from compared with where the owner is, and how old it is. A device's name is whatever the requester
 * typed, so it is also checked for names that pretend to be the approver's own machine.
 */

export type NetworkVerdict = "same" | "different" | "unknown";
type Scope = "loopback" | "private" | "link-local" | "public";

const ranges = (entries: [string, number, "ipv4" | "ipv6"][]) => {
  const list = new BlockList();
  for (const [network, prefix, family] of entries) list.addSubnet(network, prefix, family);
  return list;
};
const SCOPES: [Scope, BlockList][] = [
  [
    "loopback",
    ranges([
      ["127.0.0.0", 8, "ipv4"],
      ["::1", 128, "ipv6"],
    ]),
  ],
  [
    "link-local",
    ranges([
      ["169.254.0.0", 16, "ipv4"],
      ["fe80::", 10, "ipv6"],
    ]),
  ],
  [
    "private",
    ranges([
      ["10.0.0.0", 8, "ipv4"],
      ["172.16.0.0", 12, "ipv4"],
      ["192.168.0.0", 16, "ipv4"],
      ["100.64.0.0", 10, "ipv4"],
      ["fc00::", 7, "ipv6"],
    ]),
  ],
];
/** One network, for this purpose: the same IPv4 /24 or IPv6 /64 (a home or office LAN, one ISP line). */
const PREFIX = { ipv4: 24, ipv6: 64 } as const;

interface Address {
  address: string;
  family: "ipv4" | "ipv6";
  scope: Scope;
}

function parse(raw: string | null | undefined): Address | undefined {
  if (!raw) return undefined;
  let address = raw
    .trim()
    .replace(/^\[|\]$/g, "")
    .replace(/%.*$/, "");
  // An IPv4 client on a dual-stack socket: compare it as the IPv4 address it is.
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) address = mapped[1]!;
  const version = isIP(address);
  if (version === 0) return undefined;
  const family = version === 4 ? "ipv4" : "ipv6";
  const scope = SCOPES.find(([, list]) => list.check(address, family))?.[0] ?? "public";
  return { address, family, scope };
}

/**
 * Whether the device asked from the approver's network: both loopback, or the same kind of address (private,
 * public, …) in the same /24 (IPv4) or /64 (IPv6). Unknown when either address is missing or unreadable.
 * A dual-stack home may show one side as IPv4 and the other as IPv6: that reads as different, which errs on
 * the side of a warning.
 */
export function compareNetworks(requester: string | null | undefined, approver: string | null | undefined): NetworkVerdict {
  const a = parse(requester);
  const b = parse(approver);
  if (!a || !b) return "unknown";
  // Both on the server's own machine (127.0.0.1 and ::1 alike): one machine, one network.
  if (a.scope === "loopback" && b.scope === "loopback") return "same";
  if (a.family !== b.family || a.scope !== b.scope) return "different";
  const network = new BlockList();
  network.addSubnet(a.address, PREFIX[a.family], a.family);
  return network.check(b.address, b.family) ? "same" : "different";
}

/** A request older than this is flagged: a code the owner just got from their own tether-host is seconds old. */
export const STALE_REQUEST_MS = 2 * 60_000;

/** "less than a minute ago", "3 minutes ago", "1 hour ago". */
export function describeAge(ms: number): string {
  const minutes = Math.floor(Math.max(0, ms) / 60_000);
  if (minutes < 1) return "less than a minute ago";
  if (minutes < 60) return `${minutes} minute${minutes === 1 ? "" : "s"} ago`;
  const hours = Math.floor(minutes / 60);
  return `${hours} hour${hours === 1 ? "" : "s"} ago`;
}

/**
 * A name that claims to be the approver's own machine ("MacBook Pro (this computer)", "your laptop",
 * "This device"): the page says it is only what the requester typed. Not a filter: any name is shown, quoted
 * and labelled as the device's own words; this decides whether to add the explicit warning.
 */
const SELF_CLAIM =
  /\b(?:this|my|your|current|same|local|own)\s+(?:own\s+)?(?:computer|device|machine|mac|macbook|imac|laptop|notebook|pc|desktop|workstation|phone|tablet|browser|host|system|one)\b|\blocalhost\b/i;

export function claimsToBeThisMachine(name: string): boolean {
  return SELF_CLAIM.test(name.normalize("NFKC"));
}

export interface RequestCheck {
  /** Where the owner is (the approving request's address). */
  approverIp: string | null;
  network: NetworkVerdict;
  /** How long ago the device asked, in words; null when the code does not say. */
  age: string | null;
  stale: boolean;
  selfClaim: boolean;
}

export function checkRequest(
  request: { request_ip: string | null; requested_at: string | null; device_name: string },
  approverIp: string | null,
  now = Date.now(),
): RequestCheck {
  const requestedAt = request.requested_at ? Date.parse(request.requested_at) : Number.NaN;
  const ageMs = Number.isNaN(requestedAt) ? undefined : now - requestedAt;
  return {
    approverIp,
    network: compareNetworks(request.request_ip, approverIp),
    age: ageMs === undefined ? null : describeAge(ageMs),
    stale: ageMs !== undefined && ageMs >= STALE_REQUEST_MS,
    selfClaim: claimsToBeThisMachine(request.device_name),
  };
}
