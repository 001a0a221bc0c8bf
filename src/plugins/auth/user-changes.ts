import type { BetterAuthPlugin } from "better-auth";
import { createAuthMiddleware, isAPIError } from "better-auth/api";

type UserChangeListener = (userId: string) => void;

/** Listeners per auth instance: the registry exists before the instance (its plugin needs it). */
const registries = new WeakMap<object, Set<UserChangeListener>>();

function listenersOf(auth: object): Set<UserChangeListener> {
  let listeners = registries.get(auth);
  if (!listeners) registries.set(auth, (listeners = new Set()));
  return listeners;
}

/**
 * Tells `listener` about every user whose sessions, tokens or record this process changes (through
 * better-auth's endpoints or `userAdmin`), before the change's response leaves. Changes made anywhere
 * else arrive through database notifications.
 */
export function onUserChanged(auth: object, listener: UserChangeListener): () => void {
  const listeners = listenersOf(auth);
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Tells this process's listeners (the session cache) that something of `userId`'s changed. */
export function notifyUserChanged(auth: object, userId: string): void {
  for (const listener of listenersOf(auth)) listener(userId);
}

const PLUGIN_ID = "tether-user-changes";

/**
 * `notifyUserChanged` from inside a better-auth hook, which holds the auth context rather than the
 * instance: for a plugin whose own after-hook changes a user's credentials (after this plugin's
 * after-hook has already reported the call).
 */
export function notifyUserChangedFromHook(context: { getPlugin(id: string): unknown }, userId: string): void {
  (context.getPlugin(PLUGIN_ID) as { notify?: (userId: string) => void } | null)?.notify?.(userId);
}

/**
 * Hooks for `createAuth`: `plugin` reports every user a signed-in auth call changed (a password change,
 * revoking sessions, updating the user), `onPasswordReset` the user of a password reset (no session is
 * signed in then). `adopt(auth)` binds them to the finished instance's `onUserChanged` listeners.
 */
export function userChangeHooks() {
  const listeners = new Set<UserChangeListener>();
  const changed = (userId: string) => {
    for (const listener of listeners) listener(userId);
  };
  const hooks = {
    id: PLUGIN_ID,
    hooks: {
      after: [
        {
          // Every state-changing call made with a session (GET endpoints only read).
          matcher: (context) => context.method === "POST" || context.request?.method === "POST",
          handler: createAuthMiddleware(async (ctx) => {
            const userId = ctx.context.session?.user.id;
            if (userId && !isAPIError(ctx.context.returned)) changed(userId);
          }),
        },
      ],
    },
  } satisfies BetterAuthPlugin;
  // Found by `notifyUserChangedFromHook` through the auth context's `getPlugin`.
  const plugin = Object.assign(hooks, { notify: changed });
  return {
    plugin,
    onPasswordReset: (user: { id: string }) => changed(user.id),
    adopt(auth: object): void {
      const registry = listenersOf(auth);
      listeners.add((userId) => {
        for (const listener of registry) listener(userId);
      });
    },
  };
}
