import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ScheduleRecord, ScheduleStore } from './store.js';

/** Hooks for the schedules' metrics. */
export interface ScheduleMetrics {
  /** A written schedule is in force on this instance, `lagSeconds` after its write (Redis time, by the local clock). */
  applied(lagSeconds: number): void;
}

/** How long one XREAD blocks: the follower notices a stop within this, without polling in between. */
const BLOCK_MS = 5_000;
/** Entries read per XREAD, and specs read per HMGET while loading. */
const BATCH = 1_000;
const RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/**
 * Every instance's copy of the runtime schedules, kept current by following the store's change stream
 * (XREAD BLOCK on a connection of its own): a write is seen within one round trip, with no polling. The
 * stream is read from the last entry seen, so nothing is missed across a slow batch or a reconnect; when
 * the follower cannot be sure it saw every entry (the entry it read last is gone: trimmed before it read
 * on, or lost with a failed-over primary; or a read failed) it loads every schedule again, in batches,
 * and reports what differs.
 */
export class ScheduleFeed extends EventEmitter<{ change: [ids: string[]] }> {
  private readonly byId = new Map<string, ScheduleRecord>();
  private reader: Redis | undefined;
  private stopped = false;
  private following: Promise<void> | undefined;
  private lastEntry = '0-0';

  constructor(
    private readonly redis: Redis,
    private readonly store: ScheduleStore,
    private readonly log: Logger,
  ) {
    super();
  }

  /** A record leasebeat cannot read is reported and left out: one bad record never stops the others. */
  private readonly unreadable = (error: Error): void => this.log.error({ err: error }, error.message);

  /** The schedules as last read, by id. */
  get records(): ReadonlyMap<string, ScheduleRecord> {
    return this.byId;
  }

  /** Loads every schedule, then follows the changes until `stop()`. Resolves once the first load is done. */
  async start(): Promise<void> {
    await this.resync();
    this.reader = this.redis.duplicate({ maxRetriesPerRequest: null, enableOfflineQueue: true });
    this.reader.on('error', () => undefined);
    this.following = this.follow();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // A blocked XREAD ends with its connection.
    this.reader?.disconnect();
    await this.following;
  }

  private async follow(): Promise<void> {
    let failures = 0;
    let mustResync = false;
    while (!this.stopped) {
      try {
        if (mustResync) await this.resync();
        mustResync = false;
        const reply = (await this.reader!.xread('COUNT', BATCH, 'BLOCK', BLOCK_MS, 'STREAMS', this.store.keys.scheduleChanges, this.lastEntry));
        failures = 0;
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0) continue;
        if (!(await this.stillContiguous())) {
          mustResync = true;
          continue;
        }
        this.lastEntry = entries.at(-1)![0];
        await this.apply([...new Set(entries.map(([, fields]) => fieldOf(fields, 'id')).filter((id): id is string => id !== undefined))]);
      } catch (error) {
        if (this.stopped) return;
        // The connection dropped or Redis failed over: entries may have been missed, so load afresh.
        mustResync = true;
        const retryInMs = Math.min(RETRY_MS * 2 ** failures++, MAX_RETRY_MS);
        this.log.warn({ err: error, retryInMs }, 'the schedule feed was interrupted; loading every schedule again');
        await new Promise((resolve) => setTimeout(resolve, retryInMs).unref());
      }
    }
  }

  /**
   * Whether the entry read last is still in the stream: if the cap trimmed it before this follower read
   * on, entries after it may be gone too.
   */
  private async stillContiguous(): Promise<boolean> {
    if (this.lastEntry === '0-0') return true;
    const kept = await this.redis.xrange(this.store.keys.scheduleChanges, this.lastEntry, this.lastEntry);
    return kept.length === 1;
  }

  /** Reads the current records of `ids` and reports those whose version changed. */
  private async apply(ids: string[]): Promise<void> {
    const changed: string[] = [];
    for (let i = 0; i < ids.length; i += BATCH) {
      const slice = ids.slice(i, i + BATCH);
      const records = await this.store.getMany(slice, this.unreadable);
      slice.forEach((id, j) => {
        if (this.put(id, records[j])) changed.push(id);
      });
    }
    if (changed.length > 0) this.emit('change', changed);
  }

  /** Loads everything: the stream position first, so that a write made during the load is read again after it. */
  private async resync(): Promise<void> {
    const [newest] = await this.redis.xrevrange(this.store.keys.scheduleChanges, '+', '-', 'COUNT', 1);
    this.lastEntry = newest?.[0] ?? '0-0';
    const seen = new Set<string>();
    const changed: string[] = [];
    for await (const records of this.store.all(BATCH, this.unreadable)) {
      for (const record of records) {
        seen.add(record.id);
        if (this.put(record.id, record)) changed.push(record.id);
      }
    }
    for (const id of [...this.byId.keys()]) if (!seen.has(id) && this.put(id, undefined)) changed.push(id);
    if (changed.length > 0) this.emit('change', changed);
  }

  /** Stores one id's record (undefined: removed); true when that changed what is known. */
  private put(id: string, record: ScheduleRecord | undefined): boolean {
    const known = this.byId.get(id);
    if (!record) return this.byId.delete(id);
    if (known?.version === record.version && known.updatedAt === record.updatedAt) return false;
    this.byId.set(id, record);
    return true;
  }
}

function fieldOf(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
