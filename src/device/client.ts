import { PROTOCOL_HEADER, PROTOCOL_VERSION, type HelloBody, type HelloReply, type ResultBody } from "../protocol/index.js";

/** The server answered with an error (`{ code, message }`). */
export class ServerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ServerError";
  }

  /** The credential is no good any more (revoked, or unknown to the server): pair again. */
  get credentialRejected(): boolean {
    return this.status === 401;
  }

  /** Retrying cannot help (a 4xx other than 408/429). */
  get permanent(): boolean {
    return this.status >= 400 && this.status < 500 && this.status !== 408 && this.status !== 429;
  }
}

/** The device's HTTP calls to the server, all speaking protocol version 1. */
export class HostClient {
  constructor(
    readonly server: string,
    private token?: string,
  ) {}

  setToken(token: string): void {
    this.token = token;
  }

  headers(json: boolean): Record<string, string> {
    return {
      [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
      ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      ...(json ? { "content-type": "application/json" } : {}),
    };
  }

  private async post<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const response = await fetch(this.server + path, {
      method: "POST",
      headers: this.headers(true),
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  enroll(code: string, name: string, platform: string, signal?: AbortSignal): Promise<{ deviceId: string; token: string }> {
    return this.post("/api/host/enroll", { code, name, platform }, signal);
  }

  hello(body: HelloBody, signal?: AbortSignal): Promise<HelloReply> {
    return this.post("/api/host/hello", body, signal);
  }

  async result(body: ResultBody, signal?: AbortSignal): Promise<void> {
    await this.post("/api/host/result", body, signal);
  }

  /** Opens the event stream; the caller reads the body. */
  async stream(signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const response = await fetch(`${this.server}/api/host/stream`, { headers: { ...this.headers(false), accept: "text/event-stream" }, signal });
    if (!response.ok) throw await errorOf(response);
    if (!response.body) throw new ServerError(response.status, "NO_STREAM", "The server answered without a stream");
    return response.body;
  }
}

async function errorOf(response: Response): Promise<ServerError> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { code?: unknown; message?: unknown };
    if (typeof body.code === "string" && typeof body.message === "string") return new ServerError(response.status, body.code, body.message);
  } catch {
    /* not JSON */
  }
  return new ServerError(response.status, `HTTP_${response.status}`, `The server answered ${response.status} ${response.statusText}`.trim());
}
