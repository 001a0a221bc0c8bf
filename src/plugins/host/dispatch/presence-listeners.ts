import type { PresenceChange, PresenceListener } from "../dispatcher.js";

/** Who `onPresence` tells, for either dispatcher: every listener hears every change, whatever another one does. */
export class PresenceListeners {
  private readonly listeners = new Set<PresenceListener>();

  /** Returns the unsubscribe function `onPresence` hands out. */
  add(listener: PresenceListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  announce(change: PresenceChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch {
        /* a listener's failure is its own */
      }
    }
  }
}
