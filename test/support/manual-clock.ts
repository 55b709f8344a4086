import { abortReason, type Clock } from '../../src/util/clock.js';

interface Sleeper {
  due: number;
  seq: number;
  resolve: () => void;
}

/** Lets pending promise chains run to completion before time moves again. */
export async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A clock that only moves when the test says so. `advance` wakes sleepers in due order and lets the
 * code they resume run before moving on, so loops built on `sleep` step deterministically.
 */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];
  private seq = 0;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  /** Number of callers currently sleeping. */
  get pending(): number {
    return this.sleepers.length;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const sleeper: Sleeper = { due: this.current + Math.max(0, ms), seq: this.seq++, resolve: () => undefined };
      const onAbort = (): void => {
        this.sleepers = this.sleepers.filter((s) => s !== sleeper);
        reject(abortReason(signal!));
      };
      sleeper.resolve = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.sleepers.push(sleeper);
    });
  }

  /** Moves time forward by `ms`, waking every sleeper that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    await settle();
    for (;;) {
      this.sleepers.sort((a, b) => a.due - b.due || a.seq - b.seq);
      const next = this.sleepers[0];
      if (!next || next.due > target) break;
      this.sleepers.shift();
      this.current = Math.max(this.current, next.due);
      next.resolve();
      await settle();
    }
    this.current = target;
    await settle();
  }

  /** Jumps the wall clock without waking anyone: simulates a clock step or skew. */
  set(ms: number): void {
    this.current = ms;
  }
}
