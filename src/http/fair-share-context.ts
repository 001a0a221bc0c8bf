/**
 * The request slot of `tether-fair-share` (fair-share.ts) that the code running now belongs to, without
 * Fastify: the host service imports `outsideFairShare` to give the slot up while it waits for a device.
 */
import { AsyncLocalStorage } from "node:async_hooks";

export interface FairShareSlot {
  readonly held: boolean;
  release(): void;
  /** Takes a slot again (`again`: never refused, the request was admitted once). */
  acquire(again: boolean): Promise<void>;
}

const current = new AsyncLocalStorage<FairShareSlot>();

/** Runs `next` (the rest of a request) as holding `slot`. */
export function runInSlot(slot: FairShareSlot, next: () => void): void {
  current.run(slot, next);
}

/**
 * Runs `work` (a wait on something outside this process, such as a device's answer) without holding the
 * current request's slot, and takes a slot again before going on. Outside a gated request it just runs `work`.
 */
export async function outsideFairShare<T>(work: () => Promise<T>): Promise<T> {
  const slot = current.getStore();
  if (!slot?.held) return work();
  slot.release();
  try {
    return await work();
  } finally {
    await slot.acquire(true);
  }
}
