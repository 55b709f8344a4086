import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisClient } from '../redis/redis-topology.js';
import { ownConnection } from '../util/stay-connected.js';
import type { ScheduleRecord, ScheduleStore } from './store.js';
import { backoffMs } from '../util/backoff.js';
import { raceAbort } from '../util/abort.js';

/** Hooks for the schedules' metrics. */
export interface ScheduleMetrics {
  /** A written schedule is in force on this instance, `lagSeconds` after its write (Redis time, by the local clock). */
  applied(lagSeconds: number): void;
}

/** One schedule the feed reported changed: its record as read after the change (undefined: removed). */
export interface ScheduleChange {
  id: string;
  record: ScheduleRecord | undefined;
}

/** How long one XREAD blocks: the follower notices a stop within this, without polling in between. */
const BLOCK_MS = 5_000;
/** Entries read per XREAD, and specs read per HMGET. */
const BATCH = 1_000;
const RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/**
 * Tells an instance which runtime schedules changed, as they change, by following the store's change
 * stream (XREAD BLOCK on a connection of its own): a write is seen within one round trip, with no
 * polling, and its record is read and passed on (`change`). It holds no copy of the schedules, so an
 * instance costs the same with 10 or 1,000,000 of them: whoever needs a schedule reads it (the leader
 * when it falls due, see the due index). The stream is read from the last entry seen, so nothing is
 * missed across a slow batch or a reconnect; when the follower cannot be sure it saw every entry (the
 * entry it read last is gone: trimmed before it read on, or lost with a failed-over primary; or a read
 * failed) it says so (`resync`), and whoever follows it reads again what it relies on.
 */
export class ScheduleFeed extends EventEmitter<{ change: [changes: ScheduleChange[]]; resync: [] }> {
  private reader: RedisClient | undefined;
  /** Aborted by stop(): ends the blocked read whatever its connection does (see stop). */
  private readonly stopping = new AbortController();
  private following: Promise<void> | undefined;
  private lastEntry = '0-0';
  /** Redis time (ms) up to which every write is applied: every entry before it was read and passed on. */
  private appliedBefore = 0;
  /** The ids of the last batch passed on: their entries may share the millisecond of {@link appliedBefore}. */
  private lastBatch = new Set<string>();

  constructor(
    private readonly redis: Redis,
    private readonly store: ScheduleStore,
    private readonly log: Logger,
  ) {
    super();
  }

  /** A record leasebeat cannot read is reported and left out: one bad record never stops the others. */
  private readonly unreadable = (error: Error): void => this.log.error({ err: error }, error.message);

  /**
   * Whether this instance has passed on the write of `record` (so what follows the feed runs by it, or
   * by a newer one): its write came before the newest entry read.
   */
  applied(record: ScheduleRecord): boolean {
    return record.updatedAt < this.appliedBefore || this.lastBatch.has(record.id);
  }

  /** Starts following from the stream's newest entry. Resolves once positioned. */
  async start(): Promise<void> {
    await this.position();
    this.reader = ownConnection(this.redis, { maxRetriesPerRequest: null, enableOfflineQueue: true }, () => this.stopped, this.log);
    this.following = this.follow();
  }

  async stop(): Promise<void> {
    // A blocked XREAD ends with its connection, except when that connection is waiting to reconnect:
    // ioredis then drops the reconnect and never settles the commands it holds for resending. The read
    // is raced with this abort, so it ends either way.
    this.stopping.abort(new Error('the schedule feed stopped'));
    this.reader?.disconnect();
    await this.following;
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  private async follow(): Promise<void> {
    let failures = 0;
    let mustResync = false;
    while (!this.stopped) {
      try {
        if (mustResync) {
          await this.position();
          this.emit('resync');
        }
        mustResync = false;
        const reply = await raceAbort(this.reader!.xread('COUNT', BATCH, 'BLOCK', BLOCK_MS, 'STREAMS', this.store.keys.scheduleChanges, this.lastEntry), this.stopping.signal);
        failures = 0;
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0) continue;
        if (!(await this.stillContiguous())) {
          mustResync = true;
          continue;
        }
        const ids = [...new Set(entries.map(([, fields]) => fieldOf(fields, 'id')).filter((id): id is string => id !== undefined))];
        await this.pass(ids);
        this.lastEntry = entries.at(-1)![0];
        this.appliedBefore = entryTime(this.lastEntry);
        this.lastBatch = new Set(ids);
      } catch (error) {
        if (this.stopped) return;
        // The connection dropped or Redis failed over: entries may have been missed.
        mustResync = true;
        const retryInMs = backoffMs(failures++, RETRY_MS, MAX_RETRY_MS);
        this.log.warn({ err: error, retryInMs }, 'the schedule feed was interrupted; following it again from its newest entry');
        await sleep(retryInMs, undefined, { signal: this.stopping.signal, ref: false }).catch(() => undefined);
      }
    }
  }

  /** Positions the follower at the stream's newest entry: every write before it counts as applied. */
  private async position(): Promise<void> {
    const [entries, time] = await Promise.all([this.redis.xrevrange(this.store.keys.scheduleChanges, '+', '-', 'COUNT', 1), this.redis.time()]);
    this.lastEntry = entries[0]?.[0] ?? '0-0';
    // TIME is read after every write it could see: those of its own millisecond count too.
    this.appliedBefore = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000) + 1;
    this.lastBatch = new Set();
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

  /** Reads the current records of `ids` and passes them on. */
  private async pass(ids: string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += BATCH) {
      const slice = ids.slice(i, i + BATCH);
      const records = await this.store.getMany(slice, this.unreadable);
      this.emit('change', slice.map((id, j) => ({ id, record: records[j] })));
    }
  }
}

/** The Redis time (ms) of a stream entry id `<ms>-<seq>`. */
function entryTime(entry: string): number {
  return Number(entry.slice(0, entry.indexOf('-')));
}

function fieldOf(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
