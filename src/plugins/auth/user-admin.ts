import type { Kysely } from "kysely";
import type { Database } from "../../db/schema.js";
import type { Auth } from "./create-auth.js";

export interface UserListing {
  id: string;
  name: string;
  email: string;
  isSiteAdmin: boolean;
  deactivatedAt: Date | null;
  createdAt: Date;
}

type UserChangeListener = (userId: string) => void;
const changeListeners = new WeakMap<Auth, Set<UserChangeListener>>();

/**
 * Tells `listener` about every user this process changes through `userAdmin(auth, …)`, before the
 * operation returns. (Changes made anywhere else arrive through database notifications.)
 */
export function onUserChanged(auth: Auth, listener: UserChangeListener): () => void {
  let listeners = changeListeners.get(auth);
  if (!listeners) changeListeners.set(auth, (listeners = new Set()));
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * Tells this process's listeners (the session cache) that something of `userId`'s changed (the user,
 * a session or an API token), before the change's response leaves. Other processes hear of it through
 * database notifications, which arrive asynchronously.
 */
export function notifyUserChanged(auth: Auth, userId: string): void {
  for (const listener of changeListeners.get(auth) ?? []) listener(userId);
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
      return db
        .selectFrom("user")
        .select(["id", "name", "email", "isSiteAdmin", "deactivatedAt", "createdAt"])
        .orderBy("createdAt", "asc")
        .execute();
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
