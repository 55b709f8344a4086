import type { Redis } from 'ioredis';
import { tickJobId } from '../../src/ledger/job-data.js';
import type { SkippedRange, TickLedger } from '../../src/ledger/tick-ledger.js';
import type { JobWrites } from './events.js';
import type { RunRecord } from './jobs/_record.js';

/** The outcome of one invariant: how many items it checked and what broke it (the first few). */
export interface InvariantResult {
  name: string;
  ok: boolean;
  checked: number;
  violations: string[];
  /** How many violations there were in all; `violations` lists at most {@link MAX_LISTED}. */
  violationCount: number;
  /** It can still come true while the system drains (ticks settling, jobs finishing): the drain waits for it. */
  settles?: boolean;
}

export const MAX_LISTED = 25;

export class Violations {
  readonly items: string[] = [];
  count = 0;
  checked = 0;

  add(message: string): void {
    this.count++;
    if (this.items.length < MAX_LISTED) this.items.push(message);
  }

  result(name: string, options: { settles?: boolean } = {}): InvariantResult {
    return { name, ok: this.count === 0, checked: this.checked, violations: this.items, violationCount: this.count, ...(options.settles ? { settles: true } : {}) };
  }
}

export interface TickStats {
  ticks: number;
  enqueued: number;
  skipped: Record<string, number>;
  /** Runtime schedules: ticks around a write, which a version may or may not have owed (counted in `ticks`). */
  optional?: number;
}

/** A BullMQ job as the audit read it once after the drain. */
export interface SeenJob {
  id: string;
  name: string;
  tick: number;
  token: string;
  state: string;
  failedReason: string;
  /** Redis time of the write (its `added` event), else the job timestamp. */
  writtenAt: number;
  /** For a job not finished: what it shows of why (see whyPending in audit.ts). */
  pending?: string;
}

/** What the audit reads once and judges every tick against: BullMQ's jobs, the runs' records, the event streams. */
export interface TickGround {
  redis: Redis;
  ledger: TickLedger;
  seen: ReadonlyMap<string, SeenJob>;
  runsByJob: ReadonlyMap<string, RunRecord[]>;
  writes: ReadonlyMap<string, JobWrites>;
}

/** One job's ledger: nominal tick → its recorded fate, and its skipped ranges. */
interface JobLedger {
  states: Map<number, string>;
  ranges: SkippedRange[];
}

/**
 * The per-tick rule the audit applies to file jobs and runtime schedules alike: a tick has exactly one
 * BullMQ job under its deterministic id, recorded `enqueued` in the ledger, or a recorded skip with its
 * reason (an entry or a skipped range), never both; and a tick recorded enqueued was run or is in BullMQ.
 * Judged from Redis' own records: the ledger hash and skipped ranges, BullMQ's job hashes, the runs' log.
 */
export class TickChecker {
  /** Ticks recorded enqueued whose run never ran and that BullMQ does not hold (a lost add). */
  readonly lost = new Violations();
  private readonly ledgers = new Map<string, JobLedger>();

  constructor(private readonly ground: TickGround) {}

  /** Reads the ledger of `job` (once); an inverted skipped range is a violation of `violations`. */
  async load(job: string, violations: Violations): Promise<void> {
    if (this.ledgers.has(job)) return;
    const fields = await this.ground.redis.hgetall(this.ground.ledger.keys.ledger(job));
    const ranges = await this.ground.ledger.skippedRanges(job);
    for (const range of ranges) {
      violations.checked++;
      // An inverted range covers no tick, yet claims to: the tick it meant was lost without a record.
      if (range.from > range.to) violations.add(`${job}: inverted skipped range ${iso(range.from)} – ${iso(range.to)} (count ${range.count}, ${range.reason})`);
    }
    this.ledgers.set(job, { states: new Map(Object.entries(fields).map(([tick, state]) => [Number(tick), state])), ranges });
  }

  /**
   * Judges one nominal tick of `job` (its ledger loaded first). `owed`: the tick must have a job or a
   * recorded skip (a file job's due tick; a schedule's tick while a version surely owed it); a tick that
   * may or may not have been owed (a schedule's tick around a write) may have neither, but never a record
   * that BullMQ contradicts. Counts it into `stats`; returns whether it was run or recorded at all (for the
   * stalls) and BullMQ's job when the ledger says it was enqueued (for "every enqueued job ended").
   * `gapNote` is added to the violation of a tick with neither (what the caller knows of why).
   */
  check(job: string, tick: number, violations: Violations, owed: boolean, stats: TickStats, gapNote = ''): { accounted: boolean; enqueued: SeenJob | undefined } {
    const { states, ranges } = this.ledgers.get(job)!;
    stats.ticks++;
    if (!owed) stats.optional = (stats.optional ?? 0) + 1;
    violations.checked++;
    const where = `${job} tick ${iso(tick)}${owed ? '' : ' (around a write: owed or not)'}`;
    const id = tickJobId(job, tick);
    const found = this.ground.seen.get(id);
    const state = states.get(tick);
    const range = ranges.find((r) => r.from <= tick && tick <= r.to);
    const runs = this.ground.runsByJob.get(id);
    const accounted = state !== undefined || range !== undefined || runs !== undefined;
    let enqueued: SeenJob | undefined;
    const skipReason = state?.startsWith('skipped|') ? state.slice('skipped|'.length) : state === undefined ? range?.reason : undefined;
    if (state?.startsWith('enqueued|')) {
      this.lost.checked++;
      // Recorded as added, yet neither run nor in BullMQ: an add that a failover lost, and that no term adds again.
      if (!found && !runs) {
        const added = this.ground.writes.get(id)?.addedAt;
        this.lost.add(`${where}: recorded ${state}, but its run never ran and BullMQ has no job ${id}` +
          (added === undefined ? '' : ` (its add was seen at ${iso(added)}, ${added <= tick ? `${tick - added} ms before` : `${added - tick} ms after`} the tick)`));
      }
      stats.enqueued++;
      if (state !== `enqueued|${id}`) violations.add(`${where}: ledger says ${state}, expected job id ${id}`);
      if (!found) violations.add(`${where}: recorded as enqueued but BullMQ has no job ${id}`);
      else if (found.tick !== tick || found.name !== job) violations.add(`${where}: job ${id} carries tick ${found.tick} of ${found.name}`);
      else enqueued = found;
      if (range) violations.add(`${where}: enqueued, yet also inside a skipped range (${range.reason})`);
      const timestamps = new Set((runs ?? []).map((run) => run.timestamp));
      if (timestamps.size > 1) violations.add(`${where}: its runs show ${timestamps.size} different adds (job timestamps ${[...timestamps].join(', ')})`);
    } else if (skipReason !== undefined) {
      stats.skipped[skipReason] = (stats.skipped[skipReason] ?? 0) + 1;
      if (found) violations.add(`${where}: recorded as skipped (${skipReason}) but BullMQ has job ${id}`);
      if (skipReason === '') violations.add(`${where}: skipped without a reason`);
    } else if (state?.startsWith('claimed|')) {
      if (owed) violations.add(`${where}: still only claimed (${state}) after the drain: never enqueued`);
    } else if (owed || found || runs) {
      violations.add(`${where}: neither a job nor a recorded skip${found ? ` (BullMQ has ${id} without a ledger entry)` : runs ? ` (it ran ${runs.length} time(s) without a ledger entry)` : gapNote}`);
    }
    return { accounted, enqueued };
  }
}

export const iso = (ms: number): string => new Date(ms).toISOString();
