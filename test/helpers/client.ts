import { connect } from "node:net";
import { testFetch } from "./inject.js";

/**
 * A tiny HTTP client with a cookie jar. By default it sends the server's own origin, as a browser on that
 * site would, and speaks through `testFetch`: to an app served through inject without a socket, to any other
 * over loopback. `transport` gives it another fetch.
 */
export class TestClient {
  readonly cookies = new Map<string, string>();

  constructor(
    readonly baseURL: string,
    readonly defaults: { origin?: string | null; headers?: Record<string, string>; transport?: typeof fetch } = {},
  ) {}

  get cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }

  async request(
    method: string,
    path: string,
    init: { json?: unknown; form?: Record<string, string>; body?: string; headers?: Record<string, string>; redirect?: RequestRedirect } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { ...this.defaults.headers };
    const origin = this.defaults.origin === undefined ? this.baseURL : this.defaults.origin;
    if (origin !== null && method !== "GET" && method !== "HEAD") headers.origin = origin;
    if (this.cookies.size > 0) headers.cookie = this.cookieHeader;
    let body: string | undefined = init.body;
    if (init.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(init.json);
    } else if (init.form) {
      headers["content-type"] = "application/x-www-form-urlencoded";
      body = new URLSearchParams(init.form).toString();
    }
    Object.assign(headers, init.headers);
    const response = await (this.defaults.transport ?? testFetch)(this.baseURL + path, { method, headers, body, redirect: init.redirect ?? "manual" });
    this.absorb(response);
    return response;
  }

  absorb(response: Response): void {
    for (const cookie of response.headers.getSetCookie()) {
      const [pair, ...attributes] = cookie.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === "";
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  get = (path: string, headers?: Record<string, string>) => this.request("GET", path, { headers });
  post = (path: string, json?: unknown, headers?: Record<string, string>) => this.request("POST", path, { json: json ?? {}, headers });
  delete = (path: string, headers?: Record<string, string>) => this.request("DELETE", path, { headers });

  /** Signs up (which signs in) a new user; returns the user's id. */
  async signUp(email: string, password = "correct horse battery", name = "Test User"): Promise<string> {
    const response = await this.post("/api/auth/sign-up/email", { name, email, password });
    if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
    const body = (await response.json()) as { user: { id: string } };
    return body.user.id;
  }

  async signIn(email: string, password = "correct horse battery"): Promise<Response> {
    return this.post("/api/auth/sign-in/email", { email, password });
  }
}

/** A response's body as JSON (undefined when empty). */
export async function readJson(response: Response): Promise<any> {
  const text = await response.text();
  return text ? JSON.parse(text) : undefined;
}

let counter = 0;
/** A unique email per call, so tests never collide. */
export function uniqueEmail(label = "user"): string {
  counter += 1;
  return `${label}-${process.pid}-${counter}-${Date.now().toString(36)}@example.com`;
}

/**
 * The status line a raw HTTP/1.1 request to `url` gets: for bytes no fetch client would send (control
 * characters in a header), to see what the server itself answers.
 */
export function rawStatusLine(url: string, head: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname === "localhost" ? "127.0.0.1" : hostname, () => socket.end(`${head}\r\nConnection: close\r\n\r\n`));
    let received = "";
    socket.setEncoding("latin1").on("data", (chunk: string) => (received += chunk));
    socket.on("error", reject).on("close", () => resolve(received.split("\r\n")[0] ?? ""));
  });
}
