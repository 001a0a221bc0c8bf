import type { Tool, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type { AnnouncedTool, ToolClass } from "../../protocol/index.js";
import type { DeviceView } from "../host/service.js";

/**
 * The MCP tool list of one user, derived from the tools their devices announced. No HTTP, no SDK
 * transport: a pure function of the devices and the owner's MCP settings.
 *
 * Addressing: every device tool keeps its own name and takes one more argument, `device` (a device id
 * or its exact name), so a client sees one `read_file` however many devices the user has, and the
 * list changes only when a device comes, goes or announces other tools. The `device` argument's
 * description names each device with its roots and whether it is online.
 */

export const LIST_DEVICES = "list_devices";
export const PROPOSAL_STATUS = "proposal_status";
/** The argument naming the device; device tools' own inputs never use it (see `addDeviceArgument`). */
export const DEVICE_ARGUMENT = "device";

/** Tools that remove or replace what is on disk. */
const DESTRUCTIVE = new Set(["delete", "move", "write_file"]);

export interface CatalogOptions {
  /** Action tools (open_path, reveal_in_os) act on the owner's screen: listed only when the owner allowed them. */
  allowActions: boolean;
}

export interface CatalogEntry {
  tool: Tool;
  /** The class the devices announced, or "tether" for Tether's own tools. */
  class: ToolClass | "tether";
}

export function annotationsFor(announced: Pick<AnnouncedTool, "name" | "class">): ToolAnnotations {
  const readOnly = announced.class === "read";
  return {
    readOnlyHint: readOnly,
    ...(readOnly ? {} : { destructiveHint: DESTRUCTIVE.has(announced.name) }),
    openWorldHint: false,
  };
}

const tetherTools: CatalogEntry[] = [
  {
    class: "tether",
    tool: {
      name: LIST_DEVICES,
      title: "List devices",
      description:
        "Lists the user's devices: id, name, platform, whether each is online, its roots (the only folders its tools can reach) and its tools. Call this first; pass a device's id or name as the `device` argument of the other tools.",
      inputSchema: { type: "object", properties: {}, additionalProperties: false },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
  },
  {
    class: "tether",
    tool: {
      name: PROPOSAL_STATUS,
      title: "Proposal status",
      description:
        "The state of a change proposed by a mutate tool: pending (waiting for the owner), applying, applied (with the device's result), failed, rejected or expired.",
      inputSchema: {
        type: "object",
        properties: { proposalId: { type: "string", description: "The proposal id a mutate tool returned" } },
        required: ["proposalId"],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
  },
];

/** The user's MCP tools: Tether's own two, then each device tool once, with a `device` argument. */
export function buildCatalog(devices: readonly DeviceView[], options: CatalogOptions): CatalogEntry[] {
  const byName = new Map<string, { announced: AnnouncedTool; devices: DeviceView[] }>();
  for (const device of devices) {
    for (const announced of device.tools) {
      if (announced.class === "action" && !options.allowActions) continue;
      if (announced.name === LIST_DEVICES || announced.name === PROPOSAL_STATUS) continue;
      const entry = byName.get(announced.name);
      if (entry) entry.devices.push(device);
      else byName.set(announced.name, { announced, devices: [device] });
    }
  }
  const deviceTools = [...byName.values()]
    .sort((a, b) => a.announced.name.localeCompare(b.announced.name))
    .map(({ announced, devices: on }): CatalogEntry => ({
      class: announced.class,
      tool: {
        name: announced.name,
        description: describe(announced),
        inputSchema: addDeviceArgument(announced.inputSchema, on),
        annotations: annotationsFor(announced),
      },
    }));
  return [...tetherTools, ...deviceTools];
}

function describe(announced: AnnouncedTool): string {
  if (announced.class === "mutate") {
    return `${announced.description}\nThrough MCP this never changes the disk: it returns the diff and a proposal id; the owner approves or rejects it in the browser. Follow it with ${PROPOSAL_STATUS}.`;
  }
  if (announced.class === "action") return `${announced.description}\nActs on the owner's screen (the owner allowed action tools for MCP clients).`;
  return announced.description;
}

function addDeviceArgument(schema: Record<string, unknown>, devices: readonly DeviceView[]): Tool["inputSchema"] {
  const properties = (schema.properties as Record<string, object> | undefined) ?? {};
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : [];
  const names = devices
    .map((device) => `${device.id} = "${device.name}" (${device.online ? "online" : "offline"}; roots: ${device.roots.join(", ") || "none"})`)
    .join("; ");
  return {
    ...schema,
    type: "object",
    properties: {
      [DEVICE_ARGUMENT]: { type: "string", description: `The device to run on, by id or exact name: ${names}` },
      ...properties,
    },
    required: [DEVICE_ARGUMENT, ...required.filter((key) => key !== DEVICE_ARGUMENT)],
  };
}

/** A device named by id, or by its exact name when exactly one device has it. */
export function findDevice(devices: readonly DeviceView[], reference: string): DeviceView | "ambiguous" | undefined {
  const byId = devices.find((device) => device.id === reference);
  if (byId) return byId;
  const named = devices.filter((device) => device.name === reference);
  if (named.length > 1) return "ambiguous";
  return named[0];
}
