import type { LocalTool } from "../define.js";
import { appendFile } from "./append-file.js";
import { copyTool } from "./copy.js";
import { createDirectory } from "./create-directory.js";
import { deleteTool } from "./delete.js";
import { diskUsage } from "./disk-usage.js";
import { editFile } from "./edit-file.js";
import { globTool } from "./glob.js";
import { grepTool } from "./grep.js";
import { hashFile } from "./hash-file.js";
import { listDirectory } from "./list-directory.js";
import { moveTool } from "./move.js";
import { openPath, revealInOs } from "./open.js";
import { readFile } from "./read-file.js";
import { statTool } from "./stat.js";
import { writeFile } from "./write-file.js";

/** The 16 built-in tools, read tools first. */
export const builtinTools: readonly LocalTool[] = Object.freeze([
  listDirectory,
  readFile,
  statTool,
  globTool,
  grepTool,
  diskUsage,
  hashFile,
  writeFile,
  editFile,
  appendFile,
  createDirectory,
  moveTool,
  copyTool,
  deleteTool,
  openPath,
  revealInOs,
]);

export {
  appendFile,
  copyTool,
  createDirectory,
  deleteTool,
  diskUsage,
  editFile,
  globTool,
  grepTool,
  hashFile,
  listDirectory,
  moveTool,
  openPath,
  readFile,
  revealInOs,
  statTool,
  writeFile,
};
