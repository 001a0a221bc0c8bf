import { DEVICE_CLIENT_ID, DEVICE_CODE_GRANT_TYPE } from "../protocol/device-authorization.js";
import { deviceRequest, type DeviceRequest, type DeviceResponse } from "./http.js";
import { HOST_AGENT } from "./version.js";
import {
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type HelloBody,
  type HelloReply,
  type ResultBatchReply,
  type ResultBody,
  type UpdateReport,
} from "../protocol/index.js";

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

/** RFC 8628 §3.2's answer. */
export interface DeviceCodeGrant {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete?: string;
  expires_in: number;
  interval?: number;
}

/** The device's HTTP calls to the server, all speaking protocol version 1. */
export class HostClient {
  constructor(
    readonly server: string,
    private token?: string,
    /** Every request goes through it: `deviceRequest()` honours proxies and extra CAs (see http.ts). */
    private readonly request: DeviceRequest = deviceRequest(),
  ) {}

  setToken(token: string): void {
    this.token = token;
  }

  headers(json: boolean): Record<string, string> {
    return {
      [PROTOCOL_HEADER]: String(PROTOCOL_VERSION),
      "user-agent": HOST_AGENT,
      ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      ...(json ? { "content-type": "application/json" } : {}),
    };
  }

  private post<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    return this.postJson(path, JSON.stringify(body), signal);
  }

  /** `json`: the body, already serialised. */
  private async postJson<T>(path: string, json: string, signal?: AbortSignal): Promise<T> {
    const response = await this.request(this.server + path, {
      method: "POST",
      headers: this.headers(true),
      body: json,
      ...(signal ? { signal } : {}),
    });
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  enroll(code: string, name: string, platform: string, signal?: AbortSignal): Promise<{ deviceId: string; token: string }> {
    return this.post("/api/host/enroll", { code, name, platform }, signal);
  }

  /** RFC 8628 device authorization request: a code the owner approves on the server's /device page. */
  requestDeviceCode(device: { name: string; platform: string; version: string }, signal?: AbortSignal): Promise<DeviceCodeGrant> {
    return this.post(
      "/api/auth/device/code",
      { client_id: DEVICE_CLIENT_ID, device_name: device.name, device_platform: device.platform, device_version: device.version },
      signal,
    );
  }

  /**
   * One poll for the approved code's device credential. Refusals arrive as `ServerError`s whose code is
   * the RFC 8628 error (`authorization_pending`, `slow_down`, `expired_token`, `access_denied`, …).
   */
  async redeemDeviceCode(deviceCode: string, signal?: AbortSignal): Promise<{ deviceId: string; token: string }> {
    const body = { grant_type: DEVICE_CODE_GRANT_TYPE, device_code: deviceCode, client_id: DEVICE_CLIENT_ID };
    const credential = await this.post<{ access_token: string; device_id: string }>("/api/auth/device/credential", body, signal);
    return { deviceId: credential.device_id, token: credential.access_token };
  }

  hello(body: HelloBody, signal?: AbortSignal): Promise<HelloReply> {
    return this.post("/api/host/hello", body, signal);
  }

  /** How an update went (see src/protocol/updates.ts). */
  async updateReport(report: UpdateReport, signal?: AbortSignal): Promise<void> {
    await this.post("/api/host/update-report", report, signal);
  }

  /** The call id goes in the path: the server checks it before it reads the (possibly large) body. */
  async result(body: ResultBody, signal?: AbortSignal): Promise<void> {
    const { id, ...outcome } = body;
    await this.post(`/api/host/result/${encodeURIComponent(id)}`, outcome, signal);
  }

  /** Several results in one request; `serialized`: each a `ResultBody` as JSON. */
  async results(serialized: readonly string[], signal?: AbortSignal): Promise<ResultBatchReply> {
    return this.postJson("/api/host/results", `{"results":[${serialized.join(",")}]}`, signal);
  }

  /** Opens the event stream; the caller reads the body. */
  async stream(signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const response = await this.request(`${this.server}/api/host/stream`, { headers: { ...this.headers(false), accept: "text/event-stream" }, signal });
    if (!response.ok) throw await errorOf(response);
    return response.body;
  }
}

async function errorOf(response: DeviceResponse): Promise<ServerError> {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { code?: unknown; message?: unknown; error?: unknown; error_description?: unknown };
    if (typeof body.code === "string" && typeof body.message === "string") return new ServerError(response.status, body.code, body.message);
    // OAuth's shape (RFC 6749 §5.2), spoken by the device authorization endpoints.
    if (typeof body.error === "string")
      return new ServerError(response.status, body.error, typeof body.error_description === "string" ? body.error_description : body.error);
  } catch {
    /* not JSON */
  }
  return new ServerError(response.status, `HTTP_${response.status}`, `The server answered ${response.status}`);
}
