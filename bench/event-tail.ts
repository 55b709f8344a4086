import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';

/** How often the queue's event stream is read while it grows (BullMQ trims it to about 10,000 entries: some 7 s of these runs). */
const TAIL_POLL_MS = 250;
const READ_COUNT = 10_000;

const streamId = (id: string): [number, number] => id.split('-').map(Number) as [number, number];
const after = (a: string, b: string): boolean => {
  const [am, as] = streamId(a);
  const [bm, bs] = streamId(b);
  return am > bm || (am === bm && as > bs);
};

/** The Redis time of the first event of BullMQ queue `queue` (default prefix), if any. */
export async function firstEvent(redis: Redis, queue: string): Promise<number | undefined> {
  const [first] = await redis.xrange(`bull:${queue}:events`, '-', '+', 'COUNT', 1);
  return first ? streamId(first[0])[0] : undefined;
}

/**
 * Follows a BullMQ queue's event stream (ground truth of what reached BullMQ) from its newest entry on,
 * reading it every TAIL_POLL_MS as it grows, since BullMQ trims it to about 10,000 entries. Per job id:
 * the Redis time of its `added` event (the run was added) and of its first `waiting` (available to workers).
 */
export class EventTail {
  readonly added = new Map<string, number>();
  readonly waiting = new Map<string, number>();
  /** Entries were trimmed before this tail read them: the counts from the stream are low. */
  gap = false;
  private last = '0-0';
  private stopped = false;
  private done: Promise<void> = Promise.resolve();

  private constructor(
    private readonly redis: Redis,
    private readonly events: string,
  ) {}

  /** From the newest entry on of the event stream of BullMQ queue `queue` (default prefix). */
  static async start(redis: Redis, queue: string): Promise<EventTail> {
    const tail = new EventTail(redis, `bull:${queue}:events`);
    const [newest] = await redis.xrevrange(tail.events, '+', '-', 'COUNT', 1);
    if (newest) tail.last = newest[0];
    tail.done = tail.follow();
    return tail;
  }

  /** The Redis time of the first `added` event at or after `from`. */
  firstAddedFrom(from: number): number | undefined {
    let first: number | undefined;
    for (const at of this.added.values()) if (at >= from && (first === undefined || at < first)) first = at;
    return first;
  }

  /** Stops following, after one last read (once: a second call does nothing). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.done;
    await this.read();
  }

  private async follow(): Promise<void> {
    while (!this.stopped) {
      await this.read();
      await sleep(TAIL_POLL_MS);
    }
  }

  private async read(): Promise<void> {
    const before = this.last;
    for (;;) {
      const entries = await this.redis.xrange(this.events, `(${this.last}`, '+', 'COUNT', READ_COUNT);
      for (const [id, fields] of entries) {
        const at = streamId(id)[0];
        const jobIndex = fields.indexOf('jobId');
        if (jobIndex < 0) continue;
        const jobId = fields[jobIndex + 1]!;
        const event = fields[fields.indexOf('event') + 1];
        if (event === 'added' && !this.added.has(jobId)) this.added.set(jobId, at);
        if (event === 'waiting' && !this.waiting.has(jobId)) this.waiting.set(jobId, at);
      }
      if (entries.length > 0) this.last = entries.at(-1)![0];
      if (entries.length < READ_COUNT) break;
    }
    // Checked after the read: if the oldest entry left is still not past where the last read ended,
    // nothing this read needed had been trimmed.
    const [oldest] = await this.redis.xrange(this.events, '-', '+', 'COUNT', 1);
    if (before !== '0-0' && oldest && after(oldest[0], before)) this.gap = true;
  }
}
