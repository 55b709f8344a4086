import type { Redis } from 'ioredis';
import { LuaScript } from '../util/lua.js';
import { describeTicks, directWrites, type WritePath } from '../redis/durability.js';
import { AUDIT_IDS_PER_NAME, AUDIT_STREAM_MAXLEN, LEADER_STREAM_MAXLEN, MANUAL_RECORDS_KEPT, type KeySpace } from '../redis/keys.js';
import { isCluster, type RedisClient } from '../redis/redis-topology.js';
import { formatTriggerRecord, parseLedgerRecord, type FencingToken, type LedgerRecord, type UnstageReason } from './records.js';
import { BackfillCode, ClaimCode, ConfirmCode, MarkCode, MayStartCode, PulseCode, RaiseCode, RestoreCode, ReviewCode, ScriptProtocolError, scriptCode, SettleCode, SkipRangeCode, StopCode, TriggerCode } from './script-codes.js';
import { parseRunStop, RUN_STOP_KEEP_MS, type RunStopRequest } from './run-stops.js';
import { stagingTerm, type TickJobData } from './job-data.js';

// The protocol's types and helpers live in records.ts; they are re-exported where callers found them.
export { claimingTerm, type FencingToken, type LedgerRecord, type UnstageReason } from './records.js';

const raiseFenceScript = new LuaScript(new URL('./lua/raiseFence.lua', import.meta.url));
const claimTicksScript = new LuaScript(new URL('./lua/claimTicks.lua', import.meta.url));
const confirmTicksScript = new LuaScript(new URL('./lua/confirmTicks.lua', import.meta.url));
const takeOverScript = new LuaScript(new URL('./lua/takeOver.lua', import.meta.url));
const skipRangeScript = new LuaScript(new URL('./lua/skipRange.lua', import.meta.url));
const pruneLedgerScript = new LuaScript(new URL('./lua/pruneLedger.lua', import.meta.url));
const markUnstagingScript = new LuaScript(new URL('./lua/markUnstaging.lua', import.meta.url));
const settleUnstagingScript = new LuaScript(new URL('./lua/settleUnstaging.lua', import.meta.url));
const claimTriggerScript = new LuaScript(new URL('./lua/claimTrigger.lua', import.meta.url));
const confirmTriggerScript = new LuaScript(new URL('./lua/confirmTrigger.lua', import.meta.url));
const stagedRunMayStartScript = new LuaScript(new URL('./lua/stagedRunMayStart.lua', import.meta.url));
const restoreStagedScript = new LuaScript(new URL('./lua/restoreStaged.lua', import.meta.url));
const markReviewedScript = new LuaScript(new URL('./lua/markReviewed.lua', import.meta.url));
const pulseScript = new LuaScript(new URL('./lua/pulse.lua', import.meta.url));
const requestRunStopScript = new LuaScript(new URL('./lua/requestRunStop.lua', import.meta.url));
const countFailedRunScript = new LuaScript(new URL('./lua/countFailedRun.lua', import.meta.url));
/** Who a pause by `pauseOnFailure` is by, in the job's history. */
const AUTOMATIC_PAUSE_BY = 'leasebeat (pauseOnFailure)';
const stepBackfillScript = new LuaScript(new URL('./lua/stepBackfill.lua', import.meta.url));

/**
 * What stagedRunMayStart found: hand the run back (`start` false), or start it, with the stop a leader
 * asked of it before it started (`stop`), if any.
 */
export type StagedRunVerdict = { start: false } | { start: true; stop: RunStopRequest | undefined };

/** A staged run as its check names it: its job, BullMQ job id, tick and due time (ms). */
/** A run a worker is about to take, as BullMQ names it. */
export interface RunIds {
  job: string;
  jobId: string;
}

/** stagedRunMayStart.lua's keys (the last one the run's stop request) and arguments, for another script to check with. */
export interface StagedRunCheck {
  keys: string[];
  args: Array<string | number>;
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
   * The run is in BullMQ already: its claim was lost in a failover after the add. It is claimed to run
   * whatever a pause says, since it runs.
   */
  added?: boolean;
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

/**
 * What a confirm answered: `enqueued` (recorded now), `already-enqueued` (a retry of a confirm that
 * landed), `not-claimed` (no claim for this job id any more: claim it again, then confirm), `fenced`.
 */
export type ConfirmOutcome = 'enqueued' | 'already-enqueued' | 'not-claimed' | 'fenced';

/** The outcome of claiming a trigger request ({@link TickLedger.claimTrigger}). */
export type TriggerClaimOutcome =
  /** Add its run now; `retry` when an earlier term claimed it and never confirmed it. */
  | { kind: 'claimed'; retry: boolean }
  /** Recorded as refused now (the outcome is on the request's result list). */
  | { kind: 'refused'; reason: string }
  /** Decided before (enqueued or refused): nothing to do. */
  | { kind: 'settled'; state: string }
  | { kind: 'fenced' };

/** One step of a backfill ({@link TickLedger.stepBackfill}). */
export interface BackfillStep {
  job: string;
  backfill: string;
  mode: 'list' | 'skip' | 'finish';
  /** In order; `skip` takes one. */
  ticks: Array<{ tick: number; jobId: string }>;
  includeSkipped: boolean;
  /** Ticks later than the older of the job's watermark and `now`, less this, are left to the live lane (its staging reach). */
  reachMs: number;
  /** The authoritative time (ms). */
  now: number;
  /** The job's other backfills (ids). */
  others: string[];
  /** `finish`: why the backfill failed; omitted when it is done. */
  failure?: string;
}

/** What a backfill step answered. */
export type BackfillStepOutcome =
  /** `list`: the ticks before `tick` are decided; `tick` needs a run. */
  | { kind: 'needs-run'; cursor: number; tick: number }
  /** `skip`: recorded skipped for overlap. */
  | { kind: 'skipped'; cursor: number }
  /** Decided without a run, counted as `fate` (`list`: every tick given; `finish`: ended). */
  | { kind: 'decided'; cursor: number; fate: string }
  /** `skip`: the job is paused at run time: nothing decided; try again later. */
  | { kind: 'paused' }
  /** `finish`: a backfill claim is still pending. */
  | { kind: 'pending-left' }
  /** The backfill has ended (`state`: done, failed) or does not exist (`missing`). */
  | { kind: 'ended'; state: string }
  | { kind: 'fenced' };

/** The claim of ticks of a backfill ({@link TickLedger.claimBackfill}): a step without its mode. */
export type BackfillClaim = Omit<BackfillStep, 'mode' | 'failure'>;

/** What claiming ticks of a backfill answered. */
export type BackfillClaimOutcome =
  /**
   * One outcome per tick given, in order: `claimed` (add its run, then confirm), `reclaimed` (a backfill's
   * claim an earlier term left pending, now this term's: add it again, then confirm), `paused` (the job is
   * paused at run time: nothing decided for it nor for the ticks after it), or the fate it was decided as,
   * needing no run (`ran`, `skipped`, `pruned`, `later`; `run` when the cursor was past it). `cursor`: the
   * backfill's, after them.
   */
  | { kind: 'claims'; cursor: number; ticks: string[] }
  /** The backfill has ended (`state`: done, failed) or does not exist (`missing`). */
  | { kind: 'ended'; state: string }
  | { kind: 'fenced' };

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
   * Ticks some term left unfinished, oldest first, with their ledger records: claimed or buffered and never
   * confirmed, or a staged run whose take-back was not settled (`unstaging`). A pending tick whose record
   * is gone (pruned) is left out: there is nothing to finish.
   */
  pending: TickRecord[];
  /** Ticks recorded within the job's staging reach (see {@link TakeOverRequest}), with their records. */
  recent: TickRecord[];
  /** The newest tick recorded at or before `now` (a claim, or a skipped range's end). */
  newestDueTick: number | undefined;
}

/** A tick and its ledger record, parsed (see records.ts). */
export interface TickRecord {
  tick: number;
  state: LedgerRecord;
}

/**
 * A job to take over, and how far runs may be staged ahead of their due time (the staging horizon plus the
 * job's jitter): the takeover reads the ticks recorded within that of the newest due tick (or of now,
 * whichever is older), where every run an earlier term staged and that may not have started lies.
 */
export interface TakeOverRequest {
  job: string;
  stagedWithinMs: number;
}

/** How a take-back ended ({@link TickLedger.settleUnstaging}): pulled before it started, or it runs (ran) as staged. */
export type UnstageOutcome = 'runs' | 'taken-back';

/** The outcome of recording a skipped range. */
export type SkipRangeOutcome = 'recorded' | 'fenced' | 'invalid' | 'overlaps';

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
  /**
   * A runtime schedule's stored revision, as its writes recorded it ('' once removed; undefined when none
   * did), and the revision a leader approved last (see stagedRunMayStart.lua).
   */
  revision?: string;
  approvedRevision?: string;
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

function claimOutcome(code: unknown, detail: string): ClaimOutcome {
  switch (scriptCode('claimTicks', ClaimCode, code)) {
    case ClaimCode.Claimed:
      return { kind: 'claimed', retry: false };
    case ClaimCode.Reclaimed:
      return { kind: 'claimed', retry: true };
    case ClaimCode.Buffered:
      return { kind: 'buffered' };
    case ClaimCode.Skipped:
      return { kind: 'skipped', reason: detail };
    case ClaimCode.Settled:
      return { kind: 'settled', state: detail };
    case ClaimCode.Hole:
      return { kind: 'hole', lastScheduledTick: Number(detail) };
    case ClaimCode.Fenced:
      // Only the whole batch answers fenced, alone.
      throw new ScriptProtocolError('claimTicks', code);
  }
}

function confirmOutcome(code: (typeof ConfirmCode)[keyof typeof ConfirmCode]): ConfirmOutcome {
  switch (code) {
    case ConfirmCode.Enqueued:
      return 'enqueued';
    case ConfirmCode.AlreadyEnqueued:
      return 'already-enqueued';
    case ConfirmCode.NotClaimed:
      return 'not-claimed';
    case ConfirmCode.Fenced:
      return 'fenced';
  }
}

/** Escapes Redis glob characters, so a prefix or a job name is matched literally. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Flat `tick, record, …` pairs (as takeOver.lua returns them) as parsed records. A tick with no record
 * (`''`: pruned while still pending) is left out: no record, nothing to finish.
 */
function tickRecords(flat: string[]): TickRecord[] {
  const records: TickRecord[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const text = flat[i + 1]!;
    if (text !== '') records.push({ tick: Number(flat[i]), state: parseLedgerRecord(text) });
  }
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
    ...(fields.schedule === undefined ? {} : { revision: fields.schedule }),
    ...(fields.approved === undefined ? {} : { approvedRevision: fields.approved }),
  };
}

/**
 * The fence and the tick ledger: the Redis side of exactly-once, fenced enqueues. Every write that decides
 * the fate of a tick runs in one Lua script that first compares the caller's token with the fence, and
 * goes through `writes`: straight to Redis on one server, confirmed on replicas on a replicated topology
 * (durability.ts), so that a decision counts only once a failover cannot lose it.
 */
export class TickLedger {
  constructor(
    private readonly redis: Redis,
    readonly keys: KeySpace,
    private readonly writes: WritePath = directWrites(redis),
    /** {@link MANUAL_RECORDS_KEPT} (a test passes a small one to see the retention). */
    private readonly manualRecordsKept = MANUAL_RECORDS_KEPT,
  ) {}

  /** Moves the fence to `token`. Fails (returning the fence) when a newer term is already recorded. */
  async raiseFence(token: FencingToken, holder: string, now: number): Promise<{ ok: true } | { ok: false; fence: FencingToken }> {
    const result = await this.writes.script<[number, string?, number?]>(
      raiseFenceScript,
      [this.keys.fence, this.keys.retiredGenerations],
      [token.generation, token.leaderTransitions, holder, now],
      // A refusal decides nothing new; only a raise must outlive a failover before the term produces.
      (reply) => (scriptCode('raiseFence', RaiseCode, reply[0]) === RaiseCode.Raised ? `fence raise to ${token.generation}/${token.leaderTransitions}` : undefined),
    );
    switch (scriptCode('raiseFence', RaiseCode, result[0])) {
      case RaiseCode.Raised:
        return { ok: true };
      case RaiseCode.Refused:
        return { ok: false, fence: { generation: result[1] ?? '', leaderTransitions: Number(result[2]) } };
    }
  }

  /**
   * Claims a tick (to add now, or buffered), or records it as skipped, if `token` is still the fence.
   * A plain claim of a buffered tick releases it.
   */
  async claim(token: FencingToken, job: string, tick: number, jobId: string, request: ClaimRequest = {}): Promise<ClaimOutcome> {
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
    const reply = await this.writes.script<Array<number | string>>(
      claimTicksScript,
      [k.fence, k.retiredGenerations, k.paused, ...claims.flatMap(({ job }) => [k.ledger(job), k.ledgerIndex(job), k.pending(job), k.jobState(job), k.skips(job)])],
      [
        token.generation,
        token.leaderTransitions,
        ...claims.flatMap(({ job, tick, jobId, request = {} }) => [
          job,
          tick,
          jobId,
          request.skip ? 'skip' : request.buffer ? 'buffer' : request.added ? 'added' : 'enqueue',
          request.skip ?? '',
          request.previousTick ?? '',
        ]),
      ],
      // One WAIT covers the whole batch (one script on one connection). Even `settled` is confirmed: it may
      // be the answer to our own claim whose WAIT failed before, and the lane moves past the tick on it.
      (codes) => (codes[0] === ClaimCode.Fenced || claims.every((_, i) => Number(codes[2 * i]) === ClaimCode.Hole) ? undefined : `claims of ${describeTicks(claims)}`),
    );
    // Per-tick codes are never `Fenced`: the whole batch answers it alone.
    if (reply[0] === ClaimCode.Fenced) return claims.map(() => ({ kind: 'fenced' }));
    return claims.map((_, i) => claimOutcome(reply[2 * i], String(reply[2 * i + 1] ?? '')));
  }

  /** Records that the claimed tick's job is in BullMQ (see {@link confirmTicks}). */
  async confirm(token: FencingToken, job: string, tick: number, jobId: string, now: number): Promise<ConfirmOutcome> {
    return (await this.confirmTicks(token, [{ job, tick, jobId }], now))[0]!;
  }

  /**
   * Records that the runs of claimed ticks are in BullMQ, under the fence: each tick claimed for its job id
   * moves to `enqueued`. `not-claimed` for a tick with no claim any more (a failover lost it after the add):
   * the caller claims it again (same job id, so its add is a no-op) before confirming.
   */
  confirmTicks(token: FencingToken, confirmations: TickConfirmation[], now: number): Promise<ConfirmOutcome[]> {
    return this.confirmClaims(token, confirmations, (job) => this.keys.pending(job), now);
  }

  /** confirmTicks.lua for claims made in the pending set `pendingOf(job)` (the live lane's, or a backfill's). */
  private async confirmClaims(token: FencingToken, confirmations: TickConfirmation[], pendingOf: (job: string) => string, now: number): Promise<ConfirmOutcome[]> {
    if (confirmations.length === 0) return [];
    const k = this.keys;
    const reply = await this.writes.script<number[]>(
      confirmTicksScript,
      [k.fence, k.retiredGenerations, ...confirmations.flatMap(({ job }) => [k.ledger(job), pendingOf(job), k.jobState(job)])],
      [token.generation, token.leaderTransitions, now, ...confirmations.flatMap(({ tick, jobId }) => [tick, jobId])],
      (codes) => (codes.some((code) => code === ConfirmCode.Enqueued || code === ConfirmCode.AlreadyEnqueued) ? `enqueued records of ${describeTicks(confirmations)}` : undefined),
    );
    // Per-tick codes are never `Fenced`: the whole batch answers it alone.
    if (reply[0] === ConfirmCode.Fenced) return confirmations.map(() => 'fenced');
    return confirmations.map((_, i) => confirmOutcome(scriptCode('confirmTicks', ConfirmCode, reply[i])));
  }

  /**
   * Reads what a new leader needs of each job (see {@link TakeOverState}) in one script, and records
   * `scheduledSince` at `now` for a job no takeover saw before (confirmed like a claim: a failover that
   * lost it would let the next takeover record it later, and a brand-new job's first ticks go unowed).
   */
  async takeOverStates(jobs: TakeOverRequest[], now: number): Promise<TakeOverState[]> {
    if (jobs.length === 0) return [];
    const k = this.keys;
    const rows = await this.writes.script<Array<[string, number, string[], string[], string[], string]>>(
      takeOverScript,
      [k.paused, ...jobs.flatMap(({ job }) => [k.ledger(job), k.pending(job), k.jobState(job), k.ledgerIndex(job), k.skips(job)])],
      [now, ...jobs.flatMap(({ job, stagedWithinMs }) => [job, stagedWithinMs])],
      () => `takeover of ${jobs.length === 1 ? jobs[0]!.job : `${jobs.length} jobs`}`,
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
   * `revision`: a runtime schedule's revision that lacks the tick; then `changed` when it is no longer the
   * stored one, or the tick has not come yet (see markUnstaging.lua).
   */
  async markUnstaging(
    token: FencingToken,
    job: string,
    tick: number,
    jobId: string,
    reason: UnstageReason,
    queue: string,
    claimOnly = false,
    revision = '',
  ): Promise<'marked' | 'settled' | 'fenced' | 'changed'> {
    const k = this.keys;
    const code = scriptCode(
      'markUnstaging',
      MarkCode,
      await this.writes.script<number>(
        markUnstagingScript,
        [k.fence, k.retiredGenerations, k.ledger(job), k.pending(job), k.jobState(job)],
        [token.generation, token.leaderTransitions, tick, jobId, reason, queue, claimOnly ? '1' : '', revision],
        // The mark tells the next leader to finish the take-back: it must be on a replica before the pull.
        (reply) => (reply === MarkCode.Marked ? `take-back of ${job}@${tick}` : undefined),
      ),
    );
    switch (code) {
      case MarkCode.Marked:
        return 'marked';
      case MarkCode.Settled:
        return 'settled';
      case MarkCode.Fenced:
        return 'fenced';
      case MarkCode.Changed:
        return 'changed';
    }
  }

  /**
   * Lifts the `rescheduled` take-back mark of a runtime schedule's staged run `jobId` that a later edit
   * owes again (see restoreStaged.lua): `restored`, `not-held` (its record is not that mark), or `fenced`.
   */
  async restoreStaged(token: FencingToken, job: string, tick: number, jobId: string): Promise<'restored' | 'not-held' | 'fenced'> {
    const k = this.keys;
    const reply = await this.writes.script<number>(restoreStagedScript, [k.fence, k.retiredGenerations, k.ledger(job), k.pending(job)], [token.generation, token.leaderTransitions, tick, jobId], (code) =>
      code === RestoreCode.Restored ? `restore of the staged run ${jobId}` : undefined,
    );
    switch (scriptCode('restoreStaged', RestoreCode, reply)) {
      case RestoreCode.Restored:
        return 'restored';
      case RestoreCode.NotHeld:
        return 'not-held';
      case RestoreCode.Fenced:
        return 'fenced';
    }
  }

  /** The records of job's ticks from `from` on (ms, inclusive), in tick order: what may be staged of them. */
  async recordsFrom(job: string, from: number): Promise<TickRecord[]> {
    const ticks = await this.redis.zrangebyscore(this.keys.ledgerIndex(job), from, '+inf');
    if (ticks.length === 0) return [];
    const states = await this.redis.hmget(this.keys.ledger(job), ...ticks);
    return tickRecords(ticks.flatMap((tick, i) => [tick, states[i] ?? '']));
  }

  /**
   * Records how a take-back ended (see settleUnstaging.lua). False when the tick was not being taken back
   * any more: another term settled it first.
   */
  async settleUnstaging(job: string, tick: number, outcome: UnstageOutcome): Promise<boolean> {
    const k = this.keys;
    const reply = await this.writes.script<number>(settleUnstagingScript, [k.ledger(job), k.pending(job), k.jobState(job)], [tick, outcome], (code) =>
      code === SettleCode.Settled ? `take-back of ${job}@${tick} (${outcome})` : undefined,
    );
    return scriptCode('settleUnstaging', SettleCode, reply) === SettleCode.Settled;
  }

  /**
   * Records a range of ticks that will not run. Refuses (`invalid`) an inverted or empty range, and
   * (`overlaps`) one over a tick recorded already: another writer of the job recorded it after the caller
   * read the watermark, so the caller counts its span again from the ledger.
   */
  async skipRange(token: FencingToken, job: string, range: SkippedRange): Promise<SkipRangeOutcome> {
    const k = this.keys;
    const reply = await this.writes.script<number>(
      skipRangeScript,
      [k.fence, k.retiredGenerations, k.skips(job), k.jobState(job), k.ledgerIndex(job)],
      [token.generation, token.leaderTransitions, range.from, range.to, range.count, range.reason, JSON.stringify(range)],
      (code) => (code === SkipRangeCode.Recorded ? `skip record of ${job} ${range.from}..${range.to}` : undefined),
    );
    switch (scriptCode('skipRange', SkipRangeCode, reply)) {
      case SkipRangeCode.Recorded:
        return 'recorded';
      case SkipRangeCode.Invalid:
        return 'invalid';
      case SkipRangeCode.Overlaps:
        return 'overlaps';
      case SkipRangeCode.Fenced:
        return 'fenced';
    }
  }

  /**
   * Records that this term applied its rules to the runs earlier terms staged for `jobs` (after taking
   * them over): workers may start those runs from now on. `revisions`, by job: a runtime schedule's
   * revision its lane reviewed the staged runs by, approved if still stored (see markReviewed.lua); ''
   * for a file job. False when fenced.
   */
  async markReviewed(token: FencingToken, jobs: string[], revisions: string[] = []): Promise<boolean> {
    if (jobs.length === 0) return true;
    const k = this.keys;
    const reply = await this.writes.script<number>(
      markReviewedScript,
      [k.fence, k.retiredGenerations, ...jobs.map((job) => k.jobState(job))],
      [token.generation, token.leaderTransitions, ...jobs.map((_, i) => revisions[i] ?? '')],
      (code) => (code === ReviewCode.Marked ? `review of the staged runs of ${jobs.length === 1 ? jobs[0]! : `${jobs.length} jobs`}` : undefined),
    );
    return scriptCode('markReviewed', ReviewCode, reply) === ReviewCode.Marked;
  }

  /**
   * Asks, under the fence, that run `request.jobId` stop (see requestRunStop.lua): kept for a worker that
   * has not started it, and published to every instance's worker pool. False when fenced.
   */
  async requestRunStop(token: FencingToken, request: RunStopRequest): Promise<boolean> {
    const k = this.keys;
    const reply = await this.writes.script<number>(
      requestRunStopScript,
      [k.fence, k.retiredGenerations, k.runStop(request.jobId)],
      [token.generation, token.leaderTransitions, JSON.stringify(request), RUN_STOP_KEEP_MS, k.runStops],
      (code) => (code === StopCode.Requested ? `stop of run ${request.jobId}` : undefined),
    );
    return scriptCode('requestRunStop', StopCode, reply) === StopCode.Requested;
  }

  /**
   * Stamps the fence with Redis' time as the term's proof of life (see pulse.lua). False when fenced.
   * Not confirmed on replicas: a stamp a failover loses only makes workers hold staged runs a moment.
   */
  async pulse(token: FencingToken): Promise<boolean> {
    const reply = await pulseScript.run<number>(this.redis, [this.keys.fence, this.keys.retiredGenerations], [token.generation, token.leaderTransitions]);
    return scriptCode('pulse', PulseCode, reply) === PulseCode.Stamped;
  }

  /**
   * Whether a worker may start staged run `run` with its job data `data` (see stagedRunMayStart.lua), and
   * if so, the stop a leader asked of it; `start` false: hand it back for a moment, a leader has yet to
   * apply its rules to it.
   */
  async stagedRunMayStart(run: RunIds, data: TickJobData, aliveWithinMs: number): Promise<StagedRunVerdict> {
    const { keys, args } = this.stagedRunCheck(run, data, aliveWithinMs);
    const [code, stop] = await stagedRunMayStartScript.run<[number, string?]>(this.redis, keys, args);
    if (scriptCode('stagedRunMayStart', MayStartCode, code) === MayStartCode.HandBack) return { start: false };
    return { start: true, stop: parseRunStop(stop) };
  }

  /**
   * The keys and arguments of stagedRunMayStart.lua's check, for a worker's take to make it in its own
   * script where the ledger and the run's queue are on one server (startStagedRuns.lua). The current term
   * counts as alive when its last stamp is less than `aliveWithinMs` old.
   */
  stagedRunCheck(run: RunIds, data: TickJobData, aliveWithinMs: number): StagedRunCheck {
    const k = this.keys;
    const token = stagingTerm(data)!;
    return {
      keys: [k.fence, k.jobState(run.job), k.paused, k.ledger(run.job), k.runStop(run.jobId)],
      // A run without a due time of its own (no jitter) is due at its tick.
      // A runtime schedule's run carries its job type: its check compares the schedule's revisions.
      args: [token.generation, token.leaderTransitions, run.job, data.dueAt ?? data.tick, aliveWithinMs, data.tick, data.type === undefined ? '' : '1'],
    };
  }

  /**
   * Decides a trigger request (`leasebeat trigger`) under the fence: it runs at most once across any number
   * of leaders, never after the admin gave up on it, never while its job is paused. `refusal` is a reason
   * the caller found (`unknown-job`, `paused` by definition), or ''. `alreadyAdded`: the caller added the
   * run before, and its claim was lost in a failover; the run will run, so it is claimed whatever else.
   */
  async claimTrigger(token: FencingToken, request: { job: string; id: string; deadline: number }, jobId: string, refusal: string, alreadyAdded = false): Promise<TriggerClaimOutcome> {
    const k = this.keys;
    const [code, detail] = await this.writes.script<[number, string?]>(
      claimTriggerScript,
      [k.fence, k.retiredGenerations, k.manual(request.job), k.paused, k.triggerResult(request.id), k.manualOrder(request.job)],
      [token.generation, token.leaderTransitions, request.job, request.id, jobId, request.deadline, refusal, alreadyAdded ? '1' : '0', this.manualRecordsKept],
      ([reply]) => (reply === TriggerCode.Fenced ? undefined : `trigger ${request.id} of ${request.job}`),
    );
    switch (scriptCode('claimTrigger', TriggerCode, code)) {
      case TriggerCode.Fenced:
        return { kind: 'fenced' };
      case TriggerCode.Claimed:
        return { kind: 'claimed', retry: false };
      case TriggerCode.Reclaimed:
        return { kind: 'claimed', retry: true };
      case TriggerCode.Refused:
        return { kind: 'refused', reason: detail ?? '' };
      case TriggerCode.Settled:
        return { kind: 'settled', state: detail ?? '' };
    }
  }

  /** Records that a claimed trigger's run is in BullMQ and hands `outcome` to the admin waiting on it. */
  async confirmTrigger(token: FencingToken, job: string, requestId: string, jobId: string, outcome: string): Promise<ConfirmOutcome> {
    const k = this.keys;
    const reply = await this.writes.script<number>(
      confirmTriggerScript,
      [k.fence, k.retiredGenerations, k.manual(job), k.triggerResult(requestId)],
      [token.generation, token.leaderTransitions, requestId, jobId, outcome],
      (code) => (code === ConfirmCode.Enqueued || code === ConfirmCode.AlreadyEnqueued ? `trigger ${requestId} of ${job} enqueued` : undefined),
    );
    return confirmOutcome(scriptCode('confirmTrigger', ConfirmCode, reply));
  }

  /**
   * One step of backfill `step.backfill` of `step.job` under the fence (see stepBackfill.lua): `list`
   * decides the ticks given that need no run and stops at the first that does; `skip` records one as
   * skipped for overlap; `finish` ends the backfill (`failure`: why it failed, '' when done). `others`: the
   * job's other backfills, whose decided spans mark ticks whose records may since be pruned.
   */
  async stepBackfill(token: FencingToken, step: BackfillStep): Promise<BackfillStepOutcome> {
    const [code, cursor, detail] = await this.backfillScript<[number, string?, string?]>(token, step);
    switch (scriptCode('stepBackfill', BackfillCode, code)) {
      case BackfillCode.Fenced:
        return { kind: 'fenced' };
      case BackfillCode.NoSuchBackfill:
        return { kind: 'ended', state: 'missing' };
      case BackfillCode.Ended:
        return { kind: 'ended', state: cursor ?? '' };
      case BackfillCode.PendingLeft:
        return { kind: 'pending-left' };
      case BackfillCode.Paused:
        return { kind: 'paused' };
      case BackfillCode.Claimed:
        return { kind: 'needs-run', cursor: Number(cursor), tick: Number(detail) };
      case BackfillCode.Skipped:
        return { kind: 'skipped', cursor: Number(cursor) };
      case BackfillCode.Decided:
        return { kind: 'decided', cursor: Number(cursor), fate: detail ?? '' };
      case BackfillCode.Claims:
        throw new ScriptProtocolError('stepBackfill', code);
    }
  }

  /**
   * Claims ticks of backfill `claim.backfill` of `claim.job` under the fence, in one script (see
   * stepBackfill.lua): each tick given, in order, is claimed to add its run, or takes over the backfill's
   * claim of it an earlier term left pending, or is decided as a fate that needs no run. Keep batches
   * bounded (a few hundred): the script holds Redis meanwhile.
   */
  async claimBackfill(token: FencingToken, claim: BackfillClaim): Promise<BackfillClaimOutcome> {
    const [code, cursor, ...ticks] = await this.backfillScript<[number, string?, ...string[]]>(token, { ...claim, mode: 'claim' });
    switch (scriptCode('stepBackfill', BackfillCode, code)) {
      case BackfillCode.Fenced:
        return { kind: 'fenced' };
      case BackfillCode.NoSuchBackfill:
        return { kind: 'ended', state: 'missing' };
      case BackfillCode.Ended:
        return { kind: 'ended', state: cursor ?? '' };
      case BackfillCode.Claims:
        return { kind: 'claims', cursor: Number(cursor), ticks };
      default:
        throw new ScriptProtocolError('stepBackfill', code);
    }
  }

  /** stepBackfill.lua for `step`, made durable unless it decided nothing. */
  private backfillScript<T extends [number, ...unknown[]]>(token: FencingToken, step: BackfillStep | (BackfillClaim & { mode: 'claim' })): Promise<T> {
    const k = this.keys;
    return this.writes.script<T>(
      stepBackfillScript,
      [k.fence, k.retiredGenerations, k.ledger(step.job), k.ledgerIndex(step.job), k.skips(step.job), k.jobState(step.job), k.backfillPending(step.job), k.backfill(step.backfill), k.backfillQueue, k.paused, ...step.others.map((id) => k.backfill(id))],
      [
        token.generation,
        token.leaderTransitions,
        step.mode,
        step.includeSkipped ? '1' : '0',
        step.reachMs,
        step.now,
        step.job,
        'failure' in step ? (step.failure ?? '') : '',
        ...step.ticks.flatMap(({ tick, jobId }) => [tick, jobId]),
      ],
      // Only a step that decided nothing (fenced, refused, paused) need not outlive a failover.
      ([code, , ...outcomes]) =>
        code === BackfillCode.Fenced || code === BackfillCode.NoSuchBackfill || code === BackfillCode.Ended || code === BackfillCode.PendingLeft || code === BackfillCode.Paused || (code === BackfillCode.Claims && outcomes.every((outcome) => outcome === 'paused'))
          ? undefined
          : `backfill ${step.backfill} of ${step.job}`,
    );
  }

  /**
   * Records that the runs of a backfill's claimed ticks are in BullMQ, in one script (as {@link confirmTicks}
   * does for live claims): one outcome per tick, in order; all `fenced` when the fence is past `token`.
   */
  confirmBackfill(token: FencingToken, job: string, ticks: Array<{ tick: number; jobId: string }>, now: number): Promise<ConfirmOutcome[]> {
    return this.confirmClaims(token, ticks.map(({ tick, jobId }) => ({ job, tick, jobId })), (name) => this.keys.backfillPending(name), now);
  }

  /** Ticks a backfill claimed and did not confirm as added, oldest first: the next leader's backfill finishes them. */
  async backfillPendingTicks(job: string): Promise<number[]> {
    return (await this.redis.zrange(this.keys.backfillPending(job), 0, -1)).map(Number);
  }

  /** Ticks claimed (or buffered) by some term that never confirmed them: the next leader finishes them. */
  async pendingTicks(job: string): Promise<number[]> {
    return (await this.redis.zrange(this.keys.pending(job), 0, -1)).map(Number);
  }

  /**
   * The recorded fate of a tick as stored, if any: `claimed|<gen>|<transitions>|<jobId>` (to be added),
   * `buffered|<gen>|<transitions>|<jobId>` (to be added after the previous run), `enqueued|<jobId>`,
   * `skipped|<reason>` or `unstaging|<reason>|<jobId>|<queue>` (see records.ts; {@link tickRecord} parses it).
   */
  async tickState(job: string, tick: number): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.ledger(job), String(tick))) ?? undefined;
  }

  /** The recorded fate of a tick, parsed, if any; throws `LedgerRecordError` for a record of no known form. */
  async tickRecord(job: string, tick: number): Promise<LedgerRecord | undefined> {
    const text = await this.tickState(job, tick);
    return text === undefined ? undefined : parseLedgerRecord(text);
  }

  /** Skipped ranges recorded for a job, oldest first. */
  async skippedRanges(job: string): Promise<SkippedRange[]> {
    return (await this.redis.zrange(this.keys.skips(job), 0, -1)).map((member) => JSON.parse(member) as SkippedRange);
  }

  /** Forgets ledger entries older than `cutoff`; returns how many were removed. */
  async prune(job: string, cutoff: number, limit = 10_000): Promise<number> {
    const k = this.keys;
    return pruneLedgerScript.run<number>(this.redis, [k.ledger(job), k.ledgerIndex(job), k.skips(job), k.backfillPending(job)], [cutoff, limit]);
  }

  /** Job names the cluster knows: every job a leader has scheduled has a state hash. */
  async knownJobs(): Promise<Set<string>> {
    const names = new Set<string>();
    for await (const page of this.knownJobPages()) for (const name of page) names.add(name);
    return names;
  }

  /**
   * {@link knownJobs} a page at a time (a name may come twice), so that a million runtime schedules are
   * never held at once.
   */
  async *knownJobPages(): AsyncGenerator<string[]> {
    const prefix = this.keys.jobState('');
    // On Redis Cluster every key of the cluster shares one hash tag, but SCAN reads one node: ask each primary.
    const client = this.redis as RedisClient;
    const nodes: Redis[] = isCluster(client) ? client.nodes('master') : [client];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 1_000);
        cursor = next;
        if (keys.length > 0) yield keys.map((key) => key.slice(prefix.length));
      } while (cursor !== '0');
    }
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
    await this.writes.write(
      k.paused,
      () =>
        this.redis
          .multi()
          .hset(k.paused, job, JSON.stringify({ note, at: Date.now() }))
          .xadd(k.triggers, 'MAXLEN', '~', LEADER_STREAM_MAXLEN, '*', 'notice', 'pause', 'job', job)
          .exec(),
      () => `pause of ${job}`,
    );
  }

  /**
   * Counts a run of `job` that failed for good (`pauseAfter`: the job's `pauseOnFailure`): once that many
   * in a row have, pauses the job at run time with `note` (see countFailedRun.lua). `paused` is true for
   * the one call that paused it.
   */
  async countFailedRun(job: string, pauseAfter: number, note: string): Promise<{ streak: number; paused: boolean }> {
    const [streak, paused] = await this.writes.script<[number, number]>(
      countFailedRunScript,
      this.failedRunKeys(),
      [job, pauseAfter, note, LEADER_STREAM_MAXLEN, AUDIT_STREAM_MAXLEN, AUDIT_IDS_PER_NAME, AUTOMATIC_PAUSE_BY],
      ([, made]) => (made === 1 ? `pause of ${job} after ${pauseAfter} failed runs` : undefined),
    );
    return { streak, paused: paused === 1 };
  }

  private failedRunKeys(): string[] {
    const k = this.keys;
    return [k.failureStreaks, k.paused, k.triggers, k.audit, k.auditIndex];
  }

  /** How many runs of `job` in a row failed for good, as countFailedRun counts them (0 once one completed). */
  async failedRunsInARow(job: string): Promise<number> {
    return Number((await this.redis.hget(this.keys.failureStreaks, job)) ?? 0);
  }

  /** A run of `job` completed: its failed runs in a row start again from 0. */
  async clearFailedRuns(job: string): Promise<void> {
    await this.writes.script(countFailedRunScript, this.failedRunKeys(), [job, 0, '', LEADER_STREAM_MAXLEN, AUDIT_STREAM_MAXLEN, AUDIT_IDS_PER_NAME, AUTOMATIC_PAUSE_BY], () => undefined);
  }

  async resume(job: string): Promise<boolean> {
    const removed = await this.writes.write(this.keys.paused, () => this.redis.hdel(this.keys.paused, job), (count) => (count === 1 ? `resume of ${job}` : undefined));
    return removed === 1;
  }

  /**
   * Gives up on a trigger request no leader has taken: records it as refused (expired) unless a leader
   * recorded it first. True when it is now refused, so it will never run; false when a leader already took it.
   */
  async abandonTrigger(request: { job: string; id: string; deadline: number }): Promise<boolean> {
    const key = this.keys.manual(request.job);
    const set = await this.writes.write(
      key,
      async () => {
        // In the records' order too (NX: a leader's claim placed it already), so that retention lets it go.
        const replies = await this.redis
          .multi()
          .hsetnx(key, request.id, formatTriggerRecord({ kind: 'refused', reason: 'expired' }))
          .zadd(this.keys.manualOrder(request.job), 'NX', request.deadline, request.id)
          .exec();
        return Number(replies?.[0]?.[1] ?? 0);
      },
      (done) => (done === 1 ? `refusal of trigger ${request.id}` : undefined),
    );
    return set === 1;
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
