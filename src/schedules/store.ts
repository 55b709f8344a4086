import type { Redis } from 'ioredis';
import { AUDIT_IDS_PER_NAME, AUDIT_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import { sendBatched } from '../redis/batched-writes.js';
import type { WritePath } from '../redis/durability.js';
import { LuaScript } from '../util/lua.js';
import type { FencingToken } from '../ledger/tick-ledger.js';
import type { DueEntry } from '../producing/runtime-schedules.js';
import type { StoredSpec } from './spec.js';

const upsertSchedule = new LuaScript(new URL('./lua/upsertSchedule.lua', import.meta.url));
const removeSchedule = new LuaScript(new URL('./lua/removeSchedule.lua', import.meta.url));
const parkSchedule = new LuaScript(new URL('./lua/parkSchedule.lua', import.meta.url));
const forgetPrevious = new LuaScript(new URL('./lua/forgetPrevious.lua', import.meta.url));
const dueGroup = new LuaScript(new URL('./lua/dueGroup.lua', import.meta.url));

/** The change feed keeps about this many entries: a follower further behind than that loads everything again. */
export const SCHEDULE_FEED_MAXLEN = 100_000;

/** One stored version of a schedule. */
export interface ScheduleRecord {
  id: string;
  /** 1 for the first write; every write that changes the spec adds one. */
  version: number;
  spec: StoredSpec;
  /** Redis time (ms) of the write. */
  updatedAt: number;
  /**
   * Redis time (ms) of the write that created it (the first, or the first after a removal): no tick of
   * it from before then is owed. Edits keep it.
   */
  createdAt: number;
  /** Who wrote it: the CLI's user@host, the board's user, or what the application passed. */
  updatedBy: string;
}

/** The version a write replaced (or a removal removed), and when that write was made (Redis time, ms). */
export interface ReplacedVersion {
  endedAt: number;
  removed: boolean;
  record: ScheduleRecord;
}

/** What an upsert did: `changed` false when the stored spec was already this one (no new version). */
export interface UpsertOutcome {
  version: number;
  changed: boolean;
}

/** The stored version was not the one the write expected: someone else wrote in between. */
export class ScheduleVersionConflict extends Error {
  constructor(
    readonly id: string,
    readonly stored: number,
  ) {
    super(`schedule "${id}" is at version ${stored}, not the version the write expected; read it again and retry`);
    this.name = 'ScheduleVersionConflict';
  }
}

/**
 * Runtime schedules in Redis, beside the ledger under the cluster's hash tag: a hash of specs by id, a
 * sorted set of ids for paging, a stream that tells every instance what changed, and the due index that
 * tells the leader when to look at each one again. Each write also records who made it in the
 * deployment's audit trail (KeySpace.audit), in the same script. Writes go through the durable write
 * path, so on Sentinel and Cluster a schedule is acknowledged only once replicas hold it.
 */
export class ScheduleStore {
  constructor(
    private readonly redis: Redis,
    readonly keys: KeySpace,
    private readonly writes: WritePath,
  ) {}

  private get scriptKeys(): string[] {
    const { schedules, scheduleIds, scheduleChanges, scheduleDue, schedulePrevious, audit, auditIndex } = this.keys;
    return [schedules, scheduleIds, scheduleChanges, scheduleDue, schedulePrevious, audit, auditIndex];
  }

  /**
   * Stores `spec` as the schedule's next version, and `who` wrote it in the audit trail (see
   * upsertSchedule.lua). `reviewAt`: by when a leader must look at it (never later than its first tick;
   * see firstReviewAt); default now. `json`: the spec as JSON when the caller has it (checkScheduleSpec
   * gives it), so that it is not serialised again.
   */
  async upsert(id: string, spec: StoredSpec, who: string, options: { expectedVersion?: number; reviewAt?: number; json?: string } = {}): Promise<UpsertOutcome> {
    const args = [id, options.json ?? JSON.stringify(spec), options.expectedVersion ?? '', who, SCHEDULE_FEED_MAXLEN, options.reviewAt ?? '', AUDIT_STREAM_MAXLEN, AUDIT_IDS_PER_NAME];
    // Upserts come in bulk (an import, a provisioning script, many API calls at once): their scripts share
    // socket writes. Every answer is confirmed, "unchanged" too: it reports a version only the old primary may hold.
    const [version, written] = await sendBatched(this.redis, () =>
      this.writes.script<[number, number]>(upsertSchedule, [...this.scriptKeys, this.keys.jobState(id)], args, () => `schedule ${id}`),
    );
    if (written === -1) throw new ScheduleVersionConflict(id, version);
    return { version, changed: written === 1 };
  }

  /** Removes the schedule, recording that `who` did; answers the version removed, or undefined when there was none. */
  async remove(id: string, who: string, options: { expectedVersion?: number } = {}): Promise<number | undefined> {
    const args = [id, options.expectedVersion ?? '', SCHEDULE_FEED_MAXLEN, who, AUDIT_STREAM_MAXLEN, AUDIT_IDS_PER_NAME];
    const keys = [...this.scriptKeys, this.keys.paused, this.keys.failureStreaks, this.keys.jobState(id)];
    const removed = await this.writes.script<number>(removeSchedule, keys, args, () => `removal of schedule ${id}`);
    if (removed === -1) {
      const stored = await this.get(id);
      throw new ScheduleVersionConflict(id, stored?.version ?? 0);
    }
    return removed === 0 ? undefined : removed;
  }

  async get(id: string): Promise<ScheduleRecord | undefined> {
    const text = await this.redis.hget(this.keys.schedules, id);
    return text === null ? undefined : parseRecord(id, text);
  }

  /**
   * The records of `ids` in one round trip, in their order; undefined for an id not stored. A record
   * leasebeat cannot read is passed to `onUnreadable` and answered as undefined (default: thrown).
   */
  async getMany(ids: readonly string[], onUnreadable?: (error: ScheduleRecordError) => void): Promise<Array<ScheduleRecord | undefined>> {
    if (ids.length === 0) return [];
    const texts = await this.redis.hmget(this.keys.schedules, ...ids);
    return texts.map((text, i) => {
      if (text === null) return undefined;
      try {
        return parseRecord(ids[i]!, text);
      } catch (error) {
        if (!onUnreadable || !(error instanceof ScheduleRecordError)) throw error;
        onUnreadable(error);
        return undefined;
      }
    });
  }

  /** Up to `limit` ids after `after` (exclusive; from the first when undefined), in id order. */
  async ids(after: string | undefined, limit: number): Promise<string[]> {
    return this.redis.zrangebylex(this.keys.scheduleIds, after === undefined ? '-' : `(${after}`, '+', 'LIMIT', 0, limit);
  }

  async count(): Promise<number> {
    return this.redis.zcard(this.keys.scheduleIds);
  }

  /**
   * The versions of schedule `id` that writes replaced or removed, oldest first, while a leader may still
   * owe their ticks a record (see lua/includes/replaced.lua); empty once none is.
   */
  async replaced(id: string): Promise<ReplacedVersion[]> {
    const text = await this.redis.hget(this.keys.schedulePrevious, id);
    if (text === null) return [];
    let chain: unknown;
    try {
      // Earlier builds kept one version as "<endedAt>|edit|<record>": a chain of that one.
      chain = text.startsWith('[') ? JSON.parse(text) : [text.split('|', 2).concat(text.slice(text.indexOf('|', text.indexOf('|') + 1) + 1))];
    } catch {
      chain = undefined;
    }
    if (!Array.isArray(chain)) throw new ScheduleRecordError(id, 'has replaced versions leasebeat did not write');
    return chain.map((entry: unknown) => {
      const [endedAt, kind, record] = Array.isArray(entry) ? (entry as unknown[]) : [];
      if (!Number.isFinite(Number(endedAt)) || (kind !== 'edit' && kind !== 'remove') || typeof record !== 'string') {
        throw new ScheduleRecordError(id, 'has a replaced version leasebeat did not write');
      }
      return { endedAt: Number(endedAt), removed: kind === 'remove', record: parseRecord(id, record) };
    });
  }

  /**
   * Forgets the versions of schedule `id` that writes up to `endedAt` replaced or removed (their owed
   * ticks are accounted for); those later writes ended stay.
   */
  async forgetPrevious(id: string, endedAt: number): Promise<void> {
    await forgetPrevious.run(this.redis, [this.keys.schedulePrevious], [id, endedAt]);
  }

  /** Which of `ids` are stored, in their order. */
  async stored(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const scores = await this.redis.zmscore(this.keys.scheduleIds, ...ids);
    return scores.map((score) => score !== null);
  }

  /** When the due index says each of `ids` must be looked at (undefined: not in it), in their order. */
  async reviewAt(ids: readonly string[]): Promise<Array<number | undefined>> {
    if (ids.length === 0) return [];
    const scores = await this.redis.zmscore(this.keys.scheduleDue, ...ids);
    return scores.map((score) => (score === null ? undefined : Number(score)));
  }

  /** Up to `limit` entries of the due index due after `after` (exclusive) and by `until`, earliest first. */
  async due(after: number, until: number, limit: number): Promise<DueEntry[]> {
    const from = after === -Infinity ? '-inf' : `(${after}`;
    return pairs(await this.redis.zrangebyscore(this.keys.scheduleDue, from, until, 'WITHSCORES', 'LIMIT', 0, limit));
  }

  /**
   * Every id of the due index due exactly at `at` (a page of {@link due} may end inside such a group),
   * read `batch` at a time ({@link dueAt}): a group may be any size, and no one command reads it whole.
   */
  async dueExactly(at: number, batch = 1_000): Promise<string[]> {
    const ids: string[] = [];
    for (;;) {
      const read = await this.dueAt(at, ids.at(-1), batch);
      for (const id of read) ids.push(id);
      if (read.length < batch) return ids;
    }
  }

  /**
   * Up to `limit` ids of the due index due exactly at `at` that sort after id `after` (undefined: from
   * the first), in the index's order (see dueGroup.lua): one batch of a group due at one instant.
   */
  async dueAt(at: number, after: string | undefined, limit: number): Promise<string[]> {
    return dueGroup.run<string[]>(this.redis, [this.keys.scheduleDue], [at, after ?? '', limit]);
  }

  /** The earliest instant in the due index after `after`, or undefined when none is. */
  async nextDue(after: number): Promise<number | undefined> {
    const from = after === -Infinity ? '-inf' : `(${after}`;
    return pairs(await this.redis.zrangebyscore(this.keys.scheduleDue, from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1))[0]?.at;
  }

  /**
   * Sets when a leader must look at schedule `id` again (undefined: nothing more is owed), if `version`
   * written at `updatedAt` is still the stored one (see parkSchedule.lua). Straight to Redis, not through
   * the durable path: a failover that loses the write leaves the earlier instant, which is only early.
   */
  async park(term: FencingToken, id: string, version: number, updatedAt: number, reviewAt: number | undefined): Promise<'parked' | 'changed' | 'fenced'> {
    const keys = [this.keys.fence, this.keys.retiredGenerations, this.keys.schedules, this.keys.scheduleDue, this.keys.schedulePrevious];
    const outcome = await parkSchedule.run<number>(this.redis, keys, [term.generation, term.leaderTransitions, id, version, updatedAt, reviewAt ?? '']);
    return outcome === 1 ? 'parked' : outcome === 0 ? 'changed' : 'fenced';
  }

  /** Every stored record, `batch` at a time, in id order. */
  async *all(batch = 1_000, onUnreadable?: (error: ScheduleRecordError) => void): AsyncGenerator<ScheduleRecord[]> {
    let after: string | undefined;
    for (;;) {
      const ids = await this.ids(after, batch);
      if (ids.length === 0) return;
      yield (await this.getMany(ids, onUnreadable)).filter((record): record is ScheduleRecord => record !== undefined);
      after = ids.at(-1);
    }
  }
}

/** Thrown for a stored record leasebeat did not write: it is reported, never read as some other schedule. */
export class ScheduleRecordError extends Error {
  constructor(id: string, why: string) {
    super(`schedule "${id}": the stored record ${why}; remove it with \`leasebeat schedules rm ${id}\` and write it again`);
    this.name = 'ScheduleRecordError';
  }
}

/** `[member, score, member, score, ...]` as entries. */
function pairs(flat: string[]): DueEntry[] {
  const entries: DueEntry[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ id: flat[i]!, at: Number(flat[i + 1]) });
  return entries;
}

function parseRecord(id: string, text: string): ScheduleRecord {
  const bars: number[] = [];
  for (let at = text.indexOf('|'); at >= 0 && bars.length < 4; at = text.indexOf('|', at + 1)) bars.push(at);
  if (bars.length < 4) throw new ScheduleRecordError(id, 'is not "<version>|<updatedAt>|<createdAt>|<by>|<spec>"');
  const [first, second, third, fourth] = bars as [number, number, number, number];
  const version = Number(text.slice(0, first));
  const updatedAt = Number(text.slice(first + 1, second));
  const createdAt = Number(text.slice(second + 1, third));
  if (!Number.isInteger(version) || version < 1 || !Number.isFinite(updatedAt) || !Number.isFinite(createdAt)) throw new ScheduleRecordError(id, 'has no valid version or times');
  let spec: StoredSpec;
  try {
    spec = JSON.parse(text.slice(fourth + 1)) as StoredSpec;
  } catch {
    throw new ScheduleRecordError(id, 'holds a spec that is not JSON');
  }
  return { id, version, updatedAt, createdAt, updatedBy: text.slice(third + 1, fourth), spec };
}
