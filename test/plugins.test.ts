import { runArea } from "./helpers/run-area.js";

await runArea("plugins");
