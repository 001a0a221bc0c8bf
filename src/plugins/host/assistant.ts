import { fenceUntrusted } from "../../tools/index.js";
import type { HostService } from "./service.js";

/**
 * A tool as a chat assistant's model sees it (the MCP triple) plus the function that runs it. The
 * result is one string: the device's raw JSON result, fenced once here (`fenceUntrusted`), where it
 * is handed to a model, because a file may carry instructions aimed at the model.
 */
export interface AssistantTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  execute(input: unknown, options?: { signal?: AbortSignal }): Promise<string>;
}

/**
 * The signed-in owner's read tools, for a chat assistant: only `read` tools, only on the owner's
 * connected devices. Each tool takes a `deviceId` argument (one of the owner's online devices, whose
 * roots the description names) next to its own input. Execution goes through the same service path
 * as `POST /api/host/calls` (ownership, audit as actor `assistant`) and re-checks the class, so a
 * tool that is not `read` is refused even if it is asked for by name.
 */
export async function assistantTools(service: HostService, userId: string): Promise<AssistantTool[]> {
  const devices = (await service.listDevices(userId)).filter((device) => device.online);
  const byName = new Map<string, { description: string; schema: Record<string, unknown>; devices: typeof devices }>();
  for (const device of devices) {
    for (const tool of device.tools) {
      if (tool.class !== "read") continue;
      const entry = byName.get(tool.name);
      if (entry) entry.devices.push(device);
      else byName.set(tool.name, { description: tool.description, schema: tool.inputSchema, devices: [device] });
    }
  }

  return [...byName].map(([name, entry]) => {
    const deviceIds = entry.devices.map((device) => device.id);
    const deviceList = entry.devices.map((device) => `${device.id} = "${device.name}" (${device.platform}; roots: ${device.roots.join(", ")})`).join("; ");
    const properties = (entry.schema.properties as Record<string, unknown> | undefined) ?? {};
    const required = Array.isArray(entry.schema.required) ? (entry.schema.required as string[]) : [];
    const inputSchema: Record<string, unknown> = {
      ...entry.schema,
      type: "object",
      properties: { deviceId: { type: "string", enum: deviceIds, description: `Which device to run on: ${deviceList}` }, ...properties },
      required: ["deviceId", ...required.filter((key) => key !== "deviceId")],
    };
    return {
      name,
      description: `${entry.description} Runs on one of the user's devices (read-only).`,
      inputSchema,
      async execute(input: unknown) {
        const { deviceId: device, ...toolInput } = (input && typeof input === "object" ? input : {}) as Record<string, unknown>;
        const outcome = await service.call(
          { userId, actor: "assistant" },
          { deviceId: typeof device === "string" ? device : "", tool: name, input: toolInput, requireClass: "read" },
        );
        const deviceName = entry.devices.find((d) => d.id === device)?.name ?? String(device);
        return fenceUntrusted(outcome.kind === "result" ? outcome.result : null, `${deviceName}:${name}`);
      },
    };
  });
}
