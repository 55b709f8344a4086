import type { Redis } from 'ioredis';
import { LuaScript } from '../util/lua.js';
import type { KeySpace } from './keys.js';

const raiseFenceScript = new LuaScript(new URL('./lua/raiseFence.lua', import.meta.url));
const claimTickScript = new LuaScript(new URL('./lua/claimTick.lua', import.meta.url));
const confirmTickScript = new LuaScript(new URL('./lua/confirmTick.lua', import.meta.url));
const skipRangeScript = new LuaScript(new URL('./lua/skipRange.lua', import.meta.url));
const pruneLedgerScript = new LuaScript(new URL('./lua/pruneLedger.lua', import.meta.url));

/** The fencing token of a leadership term: the lease generation (uid) and its `leaderTransitions`. */
export interface FencingToken {
  generation: string;
  leaderTransitions: number;
}

/** The outcome of claiming one (job, tick). */
export type ClaimOutcome =
  /** Add the job now; `retry` when an earlier term claimed it, or a buffered claim was released. */
  | { kind: 'claimed'; retry: boolean }
  /** Claimed as buffered: add it once the previous run has finished (release with a plain claim). */
  | { kind: 'buffered' }
  | { kind: 'settled'; state: string }
  | { kind: 'skipped'; reason: string }
  | { kind: 'fenced' }
  /** Refused: the previous tick is not recorded; the job's watermark is `lastScheduledTick`. A caller bug. */
  | { kind: 'hole'; lastScheduledTick: number };

/** How to claim a tick: to add now (the default), to buffer behind an unfinished run, or to record a skip. */
export interface ClaimRequest {
  /** Record the tick as skipped for this reason instead of claiming it. */
  skip?: string;
  /** Claim it as buffered (overlap `bufferOne`). */
  buffer?: boolean;
  /**
   * The job's previous nominal tick as the caller scheduled it: the claim of a new tick is refused unless
   * it is recorded, so records never leave a hole. Omit only when the job has no earlier tick.
   */
  previousTick?: number;
}

/** The outcome of recording a skipped range. */
export type SkipRangeOutcome = 'recorded' | 'fenced' | 'invalid';

/** A run of ticks recorded as skipped together, e.g. ticks missed while no leader enqueued. */
export interface SkippedRange {
  from: number;
  to: number;
  count: number;
  reason: string;
}

/** Per-job state kept in Redis for status pages and for the next leader. */
export interface JobState {
  /** The newest tick recorded: every earlier owed tick of the job is recorded too (the watermark). */
  lastScheduledTick: number | undefined;
  /** The newest run: set when it is claimed, before it is in BullMQ. */
  lastJobId: string | undefined;
  lastJobTick: number | undefined;
  lastEnqueuedAt: number | undefined;
  enqueued: number;
  fenced: number;
  skipped: Record<string, number>;
}

/** The fence as stored: the highest term seen and how many stale attempts it turned away. */
export interface FenceState {
  generation: string;
  leaderTransitions: number;
  holder: string;
  /** Claims and skip records rejected because their token was not the fence's. */
  fenced: number;
  rejectedRaises: number;
}

const toNumber = (value: string | undefined): number | undefined => (value === undefined ? undefined : Number(value));

/**
 * The fence and the tick ledger: the Redis side of exactly-once, fenced enqueues. Every write that decides
 * the fate of a tick runs in one Lua script that first compares the caller's token with the fence.
 */
export class TickLedger {
  constructor(
    private readonly redis: Redis,
    readonly keys: KeySpace,
  ) {}

  /** Moves the fence to `token`. Fails (returning the fence) when a newer term is already recorded. */
  async raiseFence(token: FencingToken, holder: string, now: number): Promise<{ ok: true } | { ok: false; fence: FencingToken }> {
    const result = await raiseFenceScript.run<[number, string?, number?]>(
      this.redis,
      [this.keys.fence, this.keys.retiredGenerations],
      [token.generation, token.leaderTransitions, holder, now],
    );
    if (result[0] === 1) return { ok: true };
    return { ok: false, fence: { generation: result[1] ?? '', leaderTransitions: Number(result[2]) } };
  }

  /**
   * Claims a tick (to add now, or buffered), or records it as skipped, if `token` is still the fence.
   * A plain claim of a buffered tick releases it.
   */
  async claim(token: FencingToken, job: string, tick: number, jobId: string, request: ClaimRequest = {}): Promise<ClaimOutcome> {
    const k = this.keys;
    const mode = request.skip ? 'skip' : request.buffer ? 'buffer' : 'enqueue';
    const [code, detail] = await claimTickScript.run<[number, string?]>(
      this.redis,
      [k.fence, k.retiredGenerations, k.ledger(job), k.ledgerIndex(job), k.pending(job), k.jobState(job), k.paused],
      [token.generation, token.leaderTransitions, job, tick, jobId, mode, request.skip ?? '', request.previousTick ?? ''],
    );
    switch (code) {
      case 1:
        return { kind: 'claimed', retry: false };
      case 2:
        return { kind: 'claimed', retry: true };
      case 4:
        return { kind: 'buffered' };
      case 3:
        return { kind: 'skipped', reason: detail ?? '' };
      case 0:
        return { kind: 'settled', state: detail ?? '' };
      case -2:
        return { kind: 'hole', lastScheduledTick: Number(detail) };
      default:
        return { kind: 'fenced' };
    }
  }

  /** Records that the claimed tick's job is in BullMQ. */
  async confirm(job: string, tick: number, jobId: string, now: number): Promise<void> {
    const k = this.keys;
    await confirmTickScript.run(this.redis, [k.ledger(job), k.pending(job), k.jobState(job)], [tick, jobId, now]);
  }

  /** Records a range of ticks that will not run. Refuses (`invalid`) an inverted or empty range. */
  async skipRange(token: FencingToken, job: string, range: SkippedRange): Promise<SkipRangeOutcome> {
    const k = this.keys;
    const result = await skipRangeScript.run<number>(
      this.redis,
      [k.fence, k.retiredGenerations, k.skips(job), k.jobState(job)],
      [token.generation, token.leaderTransitions, range.from, range.to, range.count, range.reason, JSON.stringify(range)],
    );
    return result === 1 ? 'recorded' : result === -2 ? 'invalid' : 'fenced';
  }

  /**
   * Records, once, when leaders started owing a job its ticks (the first takeover that saw the job), and
   * returns that time. Catch-up of a job never ticked starts there.
   */
  async markScheduledSince(job: string, now: number): Promise<number> {
    const key = this.keys.jobState(job);
    await this.redis.hsetnx(key, 'scheduledSince', String(now));
    return Number(await this.redis.hget(key, 'scheduledSince'));
  }

  /** Ticks claimed (or buffered) by some term that never confirmed them: the next leader finishes them. */
  async pendingTicks(job: string): Promise<number[]> {
    return (await this.redis.zrange(this.keys.pending(job), 0, -1)).map(Number);
  }

  /**
   * The recorded fate of a tick, if any: `claimed|<gen>|<transitions>|<jobId>` (to be added),
   * `buffered|<gen>|<transitions>|<jobId>` (to be added after the previous run), `enqueued|<jobId>` or
   * `skipped|<reason>`.
   */
  async tickState(job: string, tick: number): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.ledger(job), String(tick))) ?? undefined;
  }

  /** Skipped ranges recorded for a job, oldest first. */
  async skippedRanges(job: string): Promise<SkippedRange[]> {
    return (await this.redis.zrange(this.keys.skips(job), 0, -1)).map((member) => JSON.parse(member) as SkippedRange);
  }

  /** Forgets ledger entries older than `cutoff`; returns how many were removed. */
  async prune(job: string, cutoff: number, limit = 10_000): Promise<number> {
    const k = this.keys;
    return pruneLedgerScript.run<number>(this.redis, [k.ledger(job), k.ledgerIndex(job), k.skips(job)], [cutoff, limit]);
  }

  async jobState(job: string): Promise<JobState> {
    const fields = await this.redis.hgetall(this.keys.jobState(job));
    const skipped: Record<string, number> = {};
    for (const [field, value] of Object.entries(fields)) {
      if (field.startsWith('skipped:')) skipped[field.slice('skipped:'.length)] = Number(value);
    }
    return {
      lastScheduledTick: toNumber(fields.lastScheduledTick),
      lastJobId: fields.lastJobId,
      lastJobTick: toNumber(fields.lastJobTick),
      lastEnqueuedAt: toNumber(fields.lastEnqueuedAt),
      enqueued: Number(fields.enqueued ?? 0),
      fenced: Number(fields.fenced ?? 0),
      skipped,
    };
  }

  async fence(): Promise<FenceState> {
    const fields = await this.redis.hgetall(this.keys.fence);
    return {
      generation: fields.generation ?? '',
      leaderTransitions: Number(fields.transitions ?? -1),
      holder: fields.holder ?? '',
      fenced: Number(fields.fenced ?? 0),
      rejectedRaises: Number(fields.rejectedRaises ?? 0),
    };
  }

  /** Pauses a job at run time; whichever instance leads obeys it from its next tick. */
  async pause(job: string, note = ''): Promise<void> {
    await this.redis.hset(this.keys.paused, job, JSON.stringify({ note, at: Date.now() }));
  }

  async resume(job: string): Promise<boolean> {
    return (await this.redis.hdel(this.keys.paused, job)) === 1;
  }

  /** Whether the job is paused at run time (the definition's own `paused` is not seen here). */
  async isPaused(job: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.paused, job)) === 1;
  }

  /** Jobs paused at run time, with their notes. */
  async pausedJobs(): Promise<Map<string, { note: string; at: number }>> {
    const fields = await this.redis.hgetall(this.keys.paused);
    return new Map(Object.entries(fields).map(([job, value]) => [job, JSON.parse(value) as { note: string; at: number }]));
  }
}
