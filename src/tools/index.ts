/**
 * Local tools: the device side of the host connector, as a library (no HTTP here). See DESIGN.md for the
 * security model.
 */
export { builtinTools } from "./builtins/index.js";
export {
  defineLocalTool,
  type LocalTool,
  type LocalToolDefinition,
  type MutateToolDefinition,
  type MutatingLocalTool,
  type OpenerCommands,
  type PlanResult,
  type RunToolDefinition,
  type RunnableLocalTool,
  type ToolClass,
  type ToolContext,
  type BlobContent,
  type ToolMode,
  type ToolResult,
} from "./define.js";
export { TOOL_ERROR_CODES, ToolError, isToolError, type ToolErrorCode } from "./errors.js";
export { capText, fenceUntrusted } from "./fence.js";
export { describeRoots, describeTool, invokeTool, type ApprovedPlan, type InvokeOptions, type ToolDescription } from "./invoke.js";
export { defaultOpener } from "./opener.js";
export { createScope, type ResolveOptions, type Scope } from "./scope.js";
export { defineShellTool, type CommandElement, type ShellArgSpec, type ShellToolDefinition } from "./shell.js";
