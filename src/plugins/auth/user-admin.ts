import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { Auth } from "./create-auth.js";
import { notifyUserChanged } from "./user-changes.js";

// The registry moved to user-changes.ts (better-auth's hooks report into it too); imported from here still.
export { notifyUserChanged, onUserChanged } from "./user-changes.js";

export interface UserListing {
  id: string;
  name: string;
  email: string;
  isSiteAdmin: boolean;
  deactivatedAt: Date | null;
  createdAt: Date;
}

/**
 * Admin operations on users. Updates go through better-auth's internal adapter (so a secondary
 * store's cached copy of the user changes too), and deactivation deletes the user's sessions: the
 * next request of a deactivated user is anonymous everywhere, not only in Tether's own resolver.
 */
export function userAdmin(auth: Auth, db: Kysely<Database>) {
  const internal = async () => (await auth.$context).internalAdapter;
  const changed = (userId: string) => notifyUserChanged(auth, userId);

  return {
    async list(): Promise<UserListing[]> {
      return db.selectFrom("user").select(["id", "name", "email", "isSiteAdmin", "deactivatedAt", "createdAt"]).orderBy("createdAt", "asc").execute();
    },

    async findByEmail(email: string): Promise<UserListing | undefined> {
      return db
        .selectFrom("user")
        .select(["id", "name", "email", "isSiteAdmin", "deactivatedAt", "createdAt"])
        .where("email", "=", email.trim().toLowerCase())
        .executeTakeFirst();
    },

    async exists(userId: string): Promise<boolean> {
      return (await db.selectFrom("user").select("id").where("id", "=", userId).executeTakeFirst()) !== undefined;
    },

    async deactivate(userId: string): Promise<void> {
      const adapter = await internal();
      await adapter.updateUser(userId, { deactivatedAt: new Date() });
      await adapter.deleteUserSessions(userId);
      changed(userId);
    },

    /** Signs the user out everywhere (every session row goes; the account stays active). */
    async revokeSessions(userId: string): Promise<void> {
      await (await internal()).deleteUserSessions(userId);
      changed(userId);
    },

    async reactivate(userId: string): Promise<void> {
      await (await internal()).updateUser(userId, { deactivatedAt: null });
      changed(userId);
    },

    async setSiteAdmin(userId: string, value: boolean): Promise<void> {
      await (await internal()).updateUser(userId, { isSiteAdmin: value });
      changed(userId);
    },

    /** Deletes the user; sessions, accounts, API tokens and devices go with them (cascade). */
    async remove(userId: string): Promise<void> {
      const adapter = await internal();
      await adapter.deleteUserSessions(userId);
      await adapter.deleteUser(userId);
      changed(userId);
    },
  };
}

export type UserAdmin = ReturnType<typeof userAdmin>;
