import { createAuth } from "../plugins/auth/create-auth.js";
import { userAdmin } from "../plugins/auth/user-admin.js";
import { ConfigError, loadConfig } from "../config/env.js";
import { DatabaseBusyError } from "../db/pglite-lock.js";
import { openRuntime } from "../runtime.js";

const USAGE = `Usage: npm run admin -- <command> <email>

Commands:
  promote <email>      make the user a site admin
  demote <email>       remove the user's site-admin role
  deactivate <email>   deactivate the user (signed out everywhere at once)
  reactivate <email>   let a deactivated user sign in again

Works on the configured database (DATABASE_URL, or the embedded one in DATA_DIR).`;

const ACTIONS = ["promote", "demote", "deactivate", "reactivate"] as const;
type Action = (typeof ACTIONS)[number];

async function main(argv: string[]): Promise<number> {
  const [command, email, ...rest] = argv;
  if (command === "--help" || command === "-h") {
    console.log(USAGE);
    return 0;
  }
  if (!ACTIONS.includes(command as Action) || !email || rest.length > 0) {
    console.error(USAGE);
    return 2;
  }
  const config = loadConfig();
  const runtime = await openRuntime(config, { migrate: true });
  try {
    const auth = createAuth({
      db: runtime.database.db,
      baseURL: config.baseURL,
      secret: runtime.secret,
    });
    const users = userAdmin(auth, runtime.database.db);
    const user = await users.findByEmail(email);
    if (!user) {
      console.error(`No user with the email ${email}. They must sign up first.`);
      return 1;
    }
    const action = command as Action;
    if (action === "promote") await users.setSiteAdmin(user.id, true);
    if (action === "demote") await users.setSiteAdmin(user.id, false);
    if (action === "deactivate") await users.deactivate(user.id);
    if (action === "reactivate") await users.reactivate(user.id);
    const done = { promote: "is now a site admin", demote: "is no longer a site admin", deactivate: "is deactivated", reactivate: "is active again" };
    console.log(`${user.email} ${done[action]}.`);
    return 0;
  } finally {
    await runtime.close();
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  console.error(error instanceof ConfigError || error instanceof DatabaseBusyError ? error.message : error);
  process.exitCode = 1;
}
