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

/** Lets `ms` pass on several processes' clocks in small steps, so that their loops interleave as in real time. */
export async function advanceTogether(clocks: ManualClock[], ms: number, step = 50): Promise<void> {
  for (let elapsed = 0; elapsed < ms; elapsed += step) {
    for (const clock of clocks) await clock.advance(Math.min(step, ms - elapsed));
  }
}

/**
 * A clock that only moves when the test says so. `advance` wakes sleepers in due order and lets the
 * code they resume run before moving on, so loops built on `sleep` step deterministically.
 *
 * It keeps a wall clock and a monotonic one, as a host does. Time passing (`advance`, `freeze`) moves
 * both; a clock step (`set`) moves only the wall clock. Sleepers fall due on the monotonic clock, as
 * `setTimeout` does. The monotonic clock starts at 0, far from any wall time, so code that mixes the two
 * readings fails loudly.
 */
export class ManualClock implements Clock {
  private wall: number;
  private elapsed = 0;
  private sleepers: Sleeper[] = [];
  private seq = 0;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.wall = start;
  }

  now(): number {
    return this.wall;
  }

  monotonic(): number {
    return this.elapsed;
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
      const sleeper: Sleeper = { due: this.elapsed + Math.max(0, ms), seq: this.seq++, resolve: () => undefined };
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

  /** Lets `ms` pass, waking every sleeper that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.elapsed + ms;
    await settle();
    for (;;) {
      this.sleepers.sort((a, b) => a.due - b.due || a.seq - b.seq);
      const next = this.sleepers[0];
      if (!next || next.due > target) break;
      this.sleepers.shift();
      this.pass(Math.max(0, next.due - this.elapsed));
      next.resolve();
      await settle();
    }
    this.pass(target - this.elapsed);
    await settle();
  }

  /**
   * Lets `ms` pass without waking anyone: the process was frozen (SIGSTOP, a long GC pause). Sleepers
   * that fell due meanwhile wake at the next `advance`, all at once, as overdue timers do.
   */
  freeze(ms: number): void {
    this.pass(ms);
  }

  /** Steps the wall clock to `ms` and nothing else: an NTP step, or a host whose clock is skewed. */
  set(ms: number): void {
    this.wall = ms;
  }

  private pass(ms: number): void {
    this.elapsed += ms;
    this.wall += ms;
  }
}
