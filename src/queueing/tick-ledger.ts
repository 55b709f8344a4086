import type { Redis } from 'ioredis';
import { LuaScript } from '../util/lua.js';
import { LEADER_STREAM_MAXLEN, type KeySpace } from './keys.js';
import { isCluster, type RedisClient } from './redis-topology.js';

const raiseFenceScript = new LuaScript(new URL('./lua/raiseFence.lua', import.meta.url));
const claimTicksScript = new LuaScript(new URL('./lua/claimTicks.lua', import.meta.url));
const confirmTicksScript = new LuaScript(new URL('./lua/confirmTicks.lua', import.meta.url));
const takeOverScript = new LuaScript(new URL('./lua/takeOver.lua', import.meta.url));
const skipRangeScript = new LuaScript(new URL('./lua/skipRange.lua', import.meta.url));
const pruneLedgerScript = new LuaScript(new URL('./lua/pruneLedger.lua', import.meta.url));
const markUnstagingScript = new LuaScript(new URL('./lua/markUnstaging.lua', import.meta.url));
const settleUnstagingScript = new LuaScript(new URL('./lua/settleUnstaging.lua', import.meta.url));

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

/** One tick to claim in a batch ({@link TickLedger.claimTicks}). */
export interface TickClaim {
  job: string;
  tick: number;
  jobId: string;
  request?: ClaimRequest;
}

/** One claimed tick whose job is now in BullMQ ({@link TickLedger.confirmTicks}). */
export interface TickConfirmation {
  job: string;
  tick: number;
  jobId: string;
}

/** What a new leader needs to know of one job to take it over ({@link TickLedger.takeOverStates}). */
export interface TakeOverState {
  /** When leaders started owing the job its ticks (recorded by the first takeover that saw it). */
  scheduledSince: number;
  /** Paused at run time (`leasebeat pause`). */
  paused: boolean;
  state: JobState;
  /**
   * Ticks some term left unfinished, oldest first, with their ledger states: claimed or buffered and never
   * confirmed, or a staged run whose take-back was not settled (`unstaging|…`).
   */
  pending: TickRecord[];
  /** Ticks recorded at or after the job's `stagedSince` (see {@link TakeOverRequest}), with their states. */
  recent: TickRecord[];
  /** The newest tick recorded at or before `now` (a claim, or a skipped range's end). */
  newestDueTick: number | undefined;
}

/** A tick and its ledger state. */
export interface TickRecord {
  tick: number;
  state: string;
}

/** A job to take over, and the oldest tick whose run may still be staged ahead of its due time. */
export interface TakeOverRequest {
  job: string;
  stagedSince: number;
}

/** Why a staged run was taken back before its due time. */
export type UnstageReason = 'paused' | 'removed' | 'rescheduled';

/** How a take-back ended ({@link TickLedger.settleUnstaging}): pulled before it started, or it runs (ran) as staged. */
export type UnstageOutcome = 'runs' | 'taken-back';

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

function claimOutcome(code: number, detail: string): ClaimOutcome {
  switch (code) {
    case 1:
      return { kind: 'claimed', retry: false };
    case 2:
      return { kind: 'claimed', retry: true };
    case 4:
      return { kind: 'buffered' };
    case 3:
      return { kind: 'skipped', reason: detail };
    case 0:
      return { kind: 'settled', state: detail };
    case -2:
      return { kind: 'hole', lastScheduledTick: Number(detail) };
    default:
      return { kind: 'fenced' };
  }
}

/** Escapes Redis glob characters, so a prefix or a job name is matched literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Flat `tick, state, …` pairs (as scripts return them) as records. */
function tickRecords(flat: string[]): TickRecord[] {
  const records: TickRecord[] = [];
  for (let i = 0; i < flat.length; i += 2) records.push({ tick: Number(flat[i]), state: flat[i + 1]! });
  return records;
}

/** A flat HGETALL reply (as scripts return it) as an object. */
function pairs(flat: string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fields;
}

function jobStateOf(fields: Record<string, string>): JobState {
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
    // Through the batch method, so that a subclass (DurableTickLedger) handles both in one place.
    return (await this.claimTicks(token, [{ job, tick, jobId, request }]))[0]!;
  }

  /**
   * Claims many ticks (of different jobs, or one job's in tick order) in one script, under one check of
   * the fence: each outcome is what {@link claim} would answer for it, in order; all are `fenced` when
   * the fence is past `token`. Keep batches bounded (a few hundred): the script holds Redis meanwhile.
   */
  async claimTicks(token: FencingToken, claims: TickClaim[]): Promise<ClaimOutcome[]> {
    if (claims.length === 0) return [];
    const k = this.keys;
    const reply = await claimTicksScript.run<Array<number | string>>(
      this.redis,
      [k.fence, k.retiredGenerations, k.paused, ...claims.flatMap(({ job }) => [k.ledger(job), k.ledgerIndex(job), k.pending(job), k.jobState(job)])],
      [
        token.generation,
        token.leaderTransitions,
        ...claims.flatMap(({ job, tick, jobId, request = {} }) => [
          job,
          tick,
          jobId,
          request.skip ? 'skip' : request.buffer ? 'buffer' : 'enqueue',
          request.skip ?? '',
          request.previousTick ?? '',
        ]),
      ],
    );
    if (reply[0] === -1) return claims.map(() => ({ kind: 'fenced' }));
    return claims.map((_, i) => claimOutcome(Number(reply[2 * i]), String(reply[2 * i + 1])));
  }

  /** Records that the claimed tick's job is in BullMQ. */
  async confirm(job: string, tick: number, jobId: string, now: number): Promise<void> {
    await this.confirmTicks([{ job, tick, jobId }], now);
  }

  /** {@link confirm} for many ticks in one script. */
  async confirmTicks(confirmations: TickConfirmation[], now: number): Promise<void> {
    if (confirmations.length === 0) return;
    const k = this.keys;
    await confirmTicksScript.run(
      this.redis,
      confirmations.flatMap(({ job }) => [k.ledger(job), k.pending(job), k.jobState(job)]),
      [now, ...confirmations.flatMap(({ tick, jobId }) => [tick, jobId])],
    );
  }

  /**
   * Reads what a new leader needs of each job (see {@link TakeOverState}) in one script, and records
   * `scheduledSince` at `now` for a job no takeover saw before.
   */
  async takeOverStates(jobs: TakeOverRequest[], now: number): Promise<TakeOverState[]> {
    if (jobs.length === 0) return [];
    const k = this.keys;
    const rows = await takeOverScript.run<Array<[string, number, string[], string[], string[], string]>>(
      this.redis,
      [k.paused, ...jobs.flatMap(({ job }) => [k.ledger(job), k.pending(job), k.jobState(job), k.ledgerIndex(job), k.skips(job)])],
      [now, ...jobs.flatMap(({ job, stagedSince }) => [job, stagedSince])],
    );
    return rows.map(([scheduledSince, paused, fields, pending, recent, newestDue]) => ({
      scheduledSince: Number(scheduledSince),
      paused: paused === 1,
      state: jobStateOf(pairs(fields)),
      pending: tickRecords(pending),
      recent: tickRecords(recent),
      newestDueTick: newestDue === '' ? undefined : Number(newestDue),
    }));
  }

  /**
   * Starts taking back the staged run `jobId` of a tick (recorded `enqueued`), under the fence: `marked`
   * when it is (or already was) being taken back, `settled` when its record says something else now.
   */
  async markUnstaging(token: FencingToken, job: string, tick: number, jobId: string, reason: UnstageReason, queue: string): Promise<'marked' | 'settled' | 'fenced'> {
    const k = this.keys;
    const result = await markUnstagingScript.run<number>(
      this.redis,
      [k.fence, k.retiredGenerations, k.ledger(job), k.pending(job)],
      [token.generation, token.leaderTransitions, tick, jobId, reason, queue],
    );
    return result === 1 ? 'marked' : result === 0 ? 'settled' : 'fenced';
  }

  /** Records how a take-back ended (see settleUnstaging.lua). False when the tick was not being taken back. */
  async settleUnstaging(job: string, tick: number, outcome: UnstageOutcome): Promise<boolean> {
    const k = this.keys;
    return (await settleUnstagingScript.run<number>(this.redis, [k.ledger(job), k.pending(job), k.jobState(job)], [tick, outcome])) === 1;
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

  /** Job names the cluster knows: every job a leader has scheduled has a state hash. */
  async knownJobs(): Promise<Set<string>> {
    const prefix = this.keys.jobState('');
    const names = new Set<string>();
    // On Redis Cluster every key of the cluster shares one hash tag, but SCAN reads one node: ask each primary.
    const client = this.redis as RedisClient;
    const nodes: Redis[] = isCluster(client) ? client.nodes('master') : [client];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 500);
        cursor = next;
        for (const key of keys) names.add(key.slice(prefix.length));
      } while (cursor !== '0');
    }
    return names;
  }

  async jobState(job: string): Promise<JobState> {
    return jobStateOf(await this.redis.hgetall(this.keys.jobState(job)));
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

  /**
   * Pauses a job at run time; whichever instance leads obeys it from its next tick. The notice on the
   * leader's stream makes it take back the runs it staged ahead of their due time at once (a leader that
   * misses it, or the next one, reads the pause when it takes the job over).
   */
  async pause(job: string, note = ''): Promise<void> {
    const k = this.keys;
    await this.redis
      .multi()
      .hset(k.paused, job, JSON.stringify({ note, at: Date.now() }))
      .xadd(k.triggers, 'MAXLEN', '~', LEADER_STREAM_MAXLEN, '*', 'notice', 'pause', 'job', job)
      .exec();
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
