import { Type } from "@sinclair/typebox";
import path from "node:path";
import { defineLocalTool, type OpenerCommands, type ToolContext } from "../define.js";
import { ToolError } from "../errors.js";
import { defaultOpener, launchOpener } from "../opener.js";
import { lstatInScope, notFound, pathField } from "./common.js";

/**
 * Opening a file with its default application runs it when it is a program, a script, a shortcut or one
 * of the many Windows types that execute code (.jnlp, .chm, .appref-ms, .settingcontent-ms, .xll,
 * .iqy…), and an action runs without approval. A deny list of such types is never complete, so
 * open_path opens only files of the document types below (an allow list), never a file with an execute
 * bit on POSIX, and folders other than macOS bundles (an .app is a program). Everything else is
 * refused with a pointer to reveal_in_os, which shows the item without opening it.
 *
 * Left out on purpose: HTML, SVG and XML (a browser runs their scripts), legacy and macro-enabled
 * Office formats (.doc, .xls, .ppt, .docm, .xlsm: macros), source code (.js, .py… are interpreted on
 * double-click on some systems) and files without an extension (nothing says what they are).
 */
const DOCUMENT_EXTENSIONS = new Set(
  (
    "txt text md markdown csv tsv log json yaml yml toml " +
    "pdf rtf odt ods odp odg docx xlsx pptx epub pages numbers key " +
    "png jpg jpeg gif webp bmp tif tiff heic heif avif ico " +
    "mp3 wav flac ogg oga opus m4a aac mp4 m4v mov mkv webm avi"
  ).split(" "),
);

/** Folder extensions that macOS treats as one runnable item (a program, an installer, an automation). */
const BUNDLE_EXTENSIONS = new Set("app pkg mpkg workflow action bundle framework plugin appex prefpane saver kext xpc".split(" "));

function refuseUnlessDocument(real: string, mode: number, isDirectory: boolean): void {
  const ext = path.extname(real).slice(1).toLowerCase();
  const allowed = isDirectory ? !BUNDLE_EXTENSIONS.has(ext) : DOCUMENT_EXTENSIONS.has(ext) && (process.platform === "win32" || (mode & 0o111) === 0);
  if (!allowed) {
    throw new ToolError(
      "REFUSED",
      `Will not open ${JSON.stringify(real)}: open_path opens documents, images, audio, video and folders only, and this could run as a program. Use reveal_in_os to show it instead.`,
      { path: real },
    );
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
  description:
    "Open a document, image, audio or video file, or a folder, with the operating system's default application (as a double-click would). Anything else (programs, scripts, shortcuts, web pages, files without an extension) is refused.",
  input,
  class: "action",
  async run(value, ctx) {
    const real = await ctx.scope.resolve(value.path);
    const stat = lstatInScope(ctx.scope, real);
    if (!stat) throw notFound(value.path);
    refuseUnlessDocument(real, stat.mode, stat.isDirectory());
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
