import { toolHints, type AnnouncedTool, type ToolHints } from "../../protocol/index.js";
import { builtinTools, describeTool } from "../../tools/index.js";

/**
 * Tether's built-in tools as the server itself defines them (src/tools/builtins): name, class, description and
 * input schema. A device announcing a tool by one of these names gets the server's contract, not its own words:
 * whatever runs on the device, the model, the pages and the dispatcher see the description, schema and class
 * Tether ships. Built-in names are thereby reserved: a consumer's own tool must not reuse one.
 *
 * The server's copy may be older or newer than a device's (both come from this source tree, at the versions
 * each runs): a parameter only the device knows is then not offered, and one only the server knows is refused by
 * the device (INVALID_INPUT). Both are safe; a device description a model would read is not.
 */
const BUILTIN_CONTRACTS: ReadonlyMap<string, AnnouncedTool> = new Map(
  builtinTools.map((tool) => {
    const described = describeTool(tool);
    // Shared by every request, never copied: frozen, so no reader can change it for the others.
    return [described.name, deepFreeze({ ...described, inputSchema: described.inputSchema as Record<string, unknown> })];
  }),
);

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** The server's own definition of a built-in tool, or undefined for a tool only the device knows (a domain tool). */
export function builtinContract(name: string): AnnouncedTool | undefined {
  return BUILTIN_CONTRACTS.get(name);
}

const BUILTIN_HINTS: ReadonlyMap<string, ToolHints> = new Map(builtinTools.flatMap((tool) => (tool.hints ? [[tool.name, tool.hints] as const] : [])));

/**
 * What a tool does beyond its class: a built-in's from its own definition (src/tools/builtins), a domain
 * tool's from its class alone (a device's own claim about its effects is not taken).
 */
export function hintsOf(announced: Pick<AnnouncedTool, "name" | "class">): Required<ToolHints> {
  const builtin = builtinContract(announced.name);
  return toolHints(announced.class, builtin?.class === announced.class ? BUILTIN_HINTS.get(announced.name) : undefined);
}

/** A device's announcement with every built-in replaced by the server's contract (what the server stores). */
export function withBuiltinContracts(tools: readonly AnnouncedTool[]): AnnouncedTool[] {
  return tools.map((tool) => BUILTIN_CONTRACTS.get(tool.name) ?? tool);
}
