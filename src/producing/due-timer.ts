import type { Clock } from '../util/clock.js';

/** A sleep on a {@link DueTimer}: resolves when due, when woken, or when the timer's term ends. */
export interface Nap {
  readonly done: Promise<void>;
  /** Ends the nap now (a no-op once it has ended). */
  wake(): void;
}

/** What a {@link DueTimer} wakes: told once, when its time comes, when rung, or when the term ends. */
export interface Sleeper {
  wakeUp(): void;
}

/** A pending wake-up on a {@link DueTimer}, to ring early. */
export interface Alarm {
  readonly at: number;
}

interface Entry extends Alarm {
  seq: number;
  sleeper: Sleeper | undefined;
}

/** How many due wake-ups one pass rings before it yields to the event loop (so their work starts in batches). */
export const DUE_BATCH = 500;

/**
 * One timer for every lane of a term: a min-heap of wake-up times behind a single `clock.sleep` for the
 * earliest. Thousands of lanes due at one instant cost one timer callback, and are woken in passes of
 * {@link DUE_BATCH} with a turn of the event loop between passes, so the first batch's Redis calls are
 * on the wire while the next batch is prepared. No per-sleep timer, listener, AbortSignal or promise: a
 * sleeping lane is its heap entry and nothing else.
 */
export class DueTimer {
  private readonly heap: Entry[] = [];
  private seq = 0;
  /** When the armed clock sleep ends; Infinity when none is armed. */
  private armedAt = Infinity;
  private disarm: AbortController | undefined;
  private draining = false;

  constructor(
    private readonly clock: Clock,
    private readonly signal: AbortSignal,
  ) {
    signal.addEventListener('abort', () => this.endAll(), { once: true });
  }

  /**
   * Wakes `sleeper` after `ms` (at once, synchronously, once the term has ended). Timed on the monotonic
   * clock: a step of the wall clock neither fires a wake-up early nor holds it back.
   */
  set(ms: number, sleeper: Sleeper): Alarm {
    const entry: Entry = { at: this.clock.monotonic() + Math.max(0, ms), seq: this.seq++, sleeper };
    if (this.signal.aborted) this.ring(entry);
    else {
      this.push(entry);
      if (!this.draining && entry.at < this.armedAt) this.arm();
    }
    return entry;
  }

  /** Wakes the alarm's sleeper now (a no-op once it was woken). Left in the heap, it is dropped at the top. */
  ring(alarm: Alarm): void {
    const entry = alarm as Entry;
    const sleeper = entry.sleeper;
    entry.sleeper = undefined;
    sleeper?.wakeUp();
  }

  /** Naps for `ms`. */
  nap(ms: number): Nap {
    let alarm: Alarm | undefined;
    const done = new Promise<void>((resolve) => (alarm = this.set(ms, { wakeUp: resolve })));
    return { done, wake: () => this.ring(alarm!) };
  }

  /** How many wake-ups are pending (rung ones not yet dropped included). */
  get size(): number {
    return this.heap.length;
  }

  private arm(): void {
    this.disarm?.abort();
    const top = this.heap[0];
    if (!top) {
      this.armedAt = Infinity;
      this.disarm = undefined;
      return;
    }
    const disarm = new AbortController();
    this.disarm = disarm;
    this.armedAt = top.at;
    this.clock.sleep(top.at - this.clock.monotonic(), disarm.signal).then(
      () => {
        if (this.disarm !== disarm) return;
        this.disarm = undefined;
        this.armedAt = Infinity;
        void this.drain();
      },
      () => undefined,
    );
  }

  /** Rings every due alarm, {@link DUE_BATCH} per turn of the event loop, then arms for the next. */
  private async drain(): Promise<void> {
    this.draining = true;
    try {
      for (;;) {
        if (this.signal.aborted) return;
        let ended = 0;
        const now = this.clock.monotonic();
        while (ended < DUE_BATCH && this.heap.length > 0 && this.heap[0]!.at <= now) {
          const entry = this.pop();
          if (!entry.sleeper) continue;
          this.ring(entry);
          ended++;
        }
        if (ended < DUE_BATCH) break;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      this.draining = false;
    }
    this.arm();
  }

  private endAll(): void {
    this.disarm?.abort();
    this.disarm = undefined;
    for (const entry of this.heap.splice(0)) this.ring(entry);
  }

  private push(entry: Entry): void {
    const heap = this.heap;
    heap.push(entry);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): Entry {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
        if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

const before = (a: Entry, b: Entry): boolean => a.at < b.at || (a.at === b.at && a.seq < b.seq);
