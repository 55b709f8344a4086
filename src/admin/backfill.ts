import type { Redis } from 'ioredis';
import type { WritePath } from '../redis/durability.js';
import type { KeySpace } from '../redis/keys.js';
import { BACKFILL_OVERLAPS, readBackfill, submitBackfill, type BackfillOverlap, type BackfillProgress } from '../producing/backfills.js';
import { retentionMs } from '../producing/fenced-enqueue.js';
import { describeTrigger, type ScheduledJob } from '../scheduling/define-job.js';
import { formatDuration } from '../scheduling/duration.js';
import { nextTicks, withTicksBeforeCreation } from '../scheduling/plan.js';

export { BACKFILL_OVERLAPS, type BackfillOverlap, type BackfillProgress, type BackfillState } from '../producing/backfills.js';

/** Runs added per second when the caller does not say: a year of a per-minute job then takes about 15 hours. */
export const DEFAULT_BACKFILL_RATE = 10;
/**
 * The highest rate accepted: with overlap `allow` the leader's desk claims, adds and confirms up to 500
 * runs a batch, 20 batches a second (see batchSize in producing/backfills.ts).
 */
export const MAX_BACKFILL_RATE = 10_000;
/** A range of more ticks than this is refused unless the caller confirms it (`yes`). */
export const BACKFILL_TICK_LIMIT = 100_000;

/** What `admin.backfill` takes. */
export interface BackfillOptions {
  /** The range's first instant, included (a Date, epoch ms, or an ISO 8601 text). */
  from: Date | number | string;
  /** The range's last instant, included; not in the future. */
  to: Date | number | string;
  /** How backfill runs may overlap one another; default `allow`. */
  overlap?: BackfillOverlap;
  /** Runs added per second at most; default {@link DEFAULT_BACKFILL_RATE}. */
  rate?: number;
  /** Also run the ticks recorded skipped (each once: it is then recorded as run). */
  includeSkipped?: boolean;
  /** Confirms a range of more than {@link BACKFILL_TICK_LIMIT} ticks. */
  yes?: boolean;
  /** Who asks, for the audit log; default the admin's `who`. */
  by?: string;
}

/**
 * A backfill refused before anything was written: `option` names the option at fault (`job` for the job
 * itself), `problem` says what is wrong and how to fix it. Thrown by `admin.backfill` for a bad option, a
 * range in the future or inverted, a range the ledger may have pruned, an empty range, a range longer
 * than {@link BACKFILL_TICK_LIMIT} ticks without `yes`, and a job no leader has scheduled yet.
 */
export class BackfillError extends Error {
  override readonly name = 'BackfillError';
  constructor(
    readonly option: 'job' | 'from' | 'to' | 'overlap' | 'rate' | 'yes',
    readonly problem: string,
  ) {
    super(`${option}: ${problem}`);
  }
}

/** What a backfill request needs of the admin. */
export interface BackfillContext {
  redis: Redis;
  keys: KeySpace;
  writes: WritePath;
  /** Redis' time (ms): the range is checked against the leader's clock, not this machine's. */
  redisNow(): Promise<number>;
  audit(name: string, by: string, detail: Record<string, unknown>): Promise<void>;
}

const iso = (ms: number): string => new Date(ms).toISOString();

function instantOf(option: 'from' | 'to', value: Date | number | string): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : Date.parse(value);
  if (!Number.isFinite(ms)) throw new BackfillError(option, `${JSON.stringify(String(value))} is not a time: give an ISO 8601 instant, like 2026-01-01T00:00:00Z`);
  return ms;
}

/** How many ticks of `job` lie in [from, to], counted up to `limit` + 1 at most. */
function countTicks(job: ScheduledJob, from: number, to: number, limit: number): number {
  let count = 0;
  for (let after = from - 1; count <= limit; ) {
    const ticks = nextTicks(job, after, 1_000);
    for (const tick of ticks) {
      if (tick > to) return count;
      if (++count > limit) return count;
    }
    if (ticks.length < 1_000) return count;
    after = ticks.at(-1)!;
  }
  return count;
}

/**
 * Checks a backfill of `job` and stores it for the leader (see BackfillDesk); returns it as stored. Throws
 * {@link BackfillError} (nothing written) when it cannot be run as asked.
 */
export async function requestBackfill(context: BackfillContext, definition: ScheduledJob, options: BackfillOptions, by: string): Promise<BackfillProgress> {
  // The leader walks the same ticks (BackfillDesk).
  const job = withTicksBeforeCreation(definition);
  const overlap = options.overlap ?? 'allow';
  if (!BACKFILL_OVERLAPS.includes(overlap)) throw new BackfillError('overlap', `${JSON.stringify(overlap)} is not one of ${BACKFILL_OVERLAPS.join(', ')}`);
  const rate = options.rate ?? DEFAULT_BACKFILL_RATE;
  if (!Number.isFinite(rate) || rate <= 0 || rate > MAX_BACKFILL_RATE) throw new BackfillError('rate', `${String(rate)} must be a number of runs a second above 0 and at most ${MAX_BACKFILL_RATE}, like 10/s`);
  const from = instantOf('from', options.from);
  const to = instantOf('to', options.to);
  if (from > to) throw new BackfillError('from', `${iso(from)} is after --to ${iso(to)}: give the earlier instant as --from`);
  const now = await context.redisNow();
  if (to > now) throw new BackfillError('to', `${iso(to)} is in the future (Redis time is ${iso(now)}): a backfill runs past ticks; give --to at or before now`);
  const total = countTicks(job, from, to, options.yes ? Infinity : BACKFILL_TICK_LIMIT);
  if (total === 0) throw new BackfillError('from', `no tick of ${job.name} (${describeTrigger(job)}, ${job.timezone}) lies from ${iso(from)} to ${iso(to)}: widen --from/--to`);
  if (total > BACKFILL_TICK_LIMIT && !options.yes) {
    throw new BackfillError('yes', `the range holds more than ${BACKFILL_TICK_LIMIT} ticks of ${job.name}: pass --yes to backfill them all, or narrow --from/--to`);
  }
  const { redis, keys } = context;
  const [watermark, since] = await redis.hmget(keys.jobState(job.name), 'lastScheduledTick', 'scheduledSince');
  if (watermark === null || since === null) throw new BackfillError('job', `no leader has scheduled ${job.name} yet: start an instance with it first, then backfill`);
  // Retention forgets the records of ticks older than the cutoff (pruneLedger.lua): from `scheduledSince`
  // on the live lane recorded every tick, so a pruned one looks unrun there, though it may have run. Such
  // a range is refused rather than clamped: the operator decides what to do with ticks that may have run.
  // (Before `scheduledSince` only backfills record ticks, and each backfill keeps the span it decided.)
  const retention = retentionMs(job);
  const cutoff = now - retention;
  const scheduledSince = Number(since);
  if (scheduledSince < cutoff && from < cutoff && to >= scheduledSince) {
    throw new BackfillError(
      'from',
      `the ledger keeps ${job.name}'s ticks for ${formatDuration(retention)}: the records of its ticks from ${iso(scheduledSince)} to ${iso(cutoff)} may be pruned, and a pruned tick may have run; give --from ${iso(cutoff)} or later, or --to before ${iso(scheduledSince)}`,
    );
  }
  const includeSkipped = options.includeSkipped === true;
  const id = await submitBackfill(redis, keys, context.writes, { job: job.name, from, to, overlap, rate, includeSkipped, by, total }, now);
  await context.audit(job.name, by, { id, from: iso(from), to: iso(to), overlap, rate, includeSkipped, total });
  return (await readBackfill(redis, keys, id))!;
}

/** One backfill on one line, as `leasebeat describe` lists them: its state, range, progress and options. */
export function formatBackfill(progress: BackfillProgress): string {
  const failed = progress.state === 'failed' ? ` (${progress.error ?? 'no reason given'})` : '';
  return (
    `${progress.id}  ${progress.state}${failed}  ${progress.from} … ${progress.to}  ${progress.done}/${progress.total} ticks, ${progress.enqueued} enqueued` +
    `  ${progress.rate}/s ${progress.overlap}${progress.includeSkipped ? ' include-skipped' : ''}  by ${progress.by}`
  );
}
