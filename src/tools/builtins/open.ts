import { Type } from "@sinclair/typebox";
import path from "node:path";
import { defineLocalTool, type OpenerCommands, type ToolContext } from "../define.js";
import { ToolError } from "../errors.js";
import { defaultOpener, launchOpener } from "../opener.js";
import { lstatInScope, notFound, pathField } from "./common.js";

/**
 * Opening a file with its default application executes it when it is a program, a script or a shortcut, and an
 * action runs without approval. So open_path refuses anything executable: by extension on every platform (the
 * extension is what Windows and desktop environments act on), by execute bit on POSIX, and macOS app bundles.
 */
const RUNNABLE_EXTENSIONS = new Set(
  (
    "exe com bat cmd msi msp msc scr pif cpl ps1 psm1 psd1 vbs vbe js jse wsf wsh hta jar lnk url reg inf scf " +
    "app command tool action workflow applescript scpt terminal pkg mpkg " +
    "desktop sh bash zsh csh ksh fish run bin appimage deb rpm snap flatpakref " +
    "py pyw pyc pl rb php lua"
  ).split(" "),
);

function refuseRunnable(real: string, mode: number, isDirectory: boolean): void {
  const ext = path.extname(real).slice(1).toLowerCase();
  const executableBit = process.platform !== "win32" && !isDirectory && (mode & 0o111) !== 0;
  if (RUNNABLE_EXTENSIONS.has(ext) || executableBit) {
    throw new ToolError("REFUSED", `Will not open ${JSON.stringify(real)}: opening it could run it as a program. Use reveal_in_os to show it instead.`, { path: real });
  }
}

function commands(ctx: ToolContext): OpenerCommands {
  const fallback = defaultOpener();
  const given = ctx.opener ?? {};
  return {
    open: given.open ?? fallback.open,
    reveal: given.reveal ?? fallback.reveal,
    revealOpensParent: given.reveal ? (given.revealOpensParent ?? false) : (fallback.revealOpensParent ?? false),
  };
}

const input = Type.Object({ path: pathField("File or folder") }, { additionalProperties: false });

export const openPath = defineLocalTool({
  name: "open_path",
  description: "Open a file or folder with the operating system's default application (as a double-click would). Programs, scripts and shortcuts are refused.",
  input,
  class: "action",
  async run(value, ctx) {
    const real = await ctx.scope.resolve(value.path);
    const stat = lstatInScope(ctx.scope, real);
    if (!stat) throw notFound(value.path);
    refuseRunnable(real, stat.mode, stat.isDirectory());
    const outcome = await launchOpener(commands(ctx).open, real, ctx.signal);
    return { path: real, opened: true, command: outcome.command, stillRunning: outcome.stillRunning };
  },
});

export const revealInOs = defineLocalTool({
  name: "reveal_in_os",
  description: "Show a file or folder in the operating system's file manager (Finder, Explorer, or the folder holding it on Linux). Nothing is opened or run.",
  input,
  class: "action",
  async run(value, ctx) {
    const real = await ctx.scope.resolve(value.path);
    if (!lstatInScope(ctx.scope, real)) throw notFound(value.path);
    const cmd = commands(ctx);
    // Linux has no portable "select this item": open the folder holding it (a root is shown itself).
    const target = cmd.revealOpensParent && !ctx.scope.roots.includes(real) ? path.dirname(real) : real;
    const outcome = await launchOpener(cmd.reveal, target, ctx.signal);
    return { path: real, revealed: true, command: outcome.command, stillRunning: outcome.stillRunning };
  },
});
