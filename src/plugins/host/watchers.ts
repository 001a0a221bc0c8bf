/** What a live page is told changed: the owner's devices, or their proposals. */
export type WatchTopic = "devices" | "proposals";

export type WatchListener = (topic: WatchTopic, deviceId?: string) => void;

export interface Watchers {
  /** Tells every listener of the user; a listener that throws is skipped (its failure is its own). */
  notify: (userId: string, topic: WatchTopic, deviceId?: string) => void;
  /** Adds a listener of the user's changes; the returned function removes it. */
  watch: (userId: string, listener: WatchListener) => () => void;
}

/** The listeners of each user's changes, on this replica (live pages: /devices, the MCP notification streams). */
export function createWatchers(): Watchers {
  const watchers = new Map<string, Set<WatchListener>>();
  return {
    notify(userId, topic, deviceId) {
      for (const listener of watchers.get(userId) ?? []) {
        try {
          listener(topic, deviceId);
        } catch {
          /* a watcher's failure is its own */
        }
      }
    },
    watch(userId, listener) {
      let set = watchers.get(userId);
      if (!set) watchers.set(userId, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) watchers.delete(userId);
      };
    },
  };
}
