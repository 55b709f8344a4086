import { spansOfEnded, type SkippedTicks } from '../scheduling/plan.js';
import type { LaneTerm } from './lane-term.js';

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * A skipped span was refused because a tick in it was recorded after the caller read the watermark (by
 * another writer of the job in this term). Thrown to be retried: the span is counted again from the
 * ledger, which now starts past that tick.
 */
export class SpanOverlapsRecord extends Error {
  constructor(job: string, from: number, to: number) {
    super(`skipped span of ${job} ${iso(from)}..${iso(to)} covers a tick recorded meanwhile; counting it again from the ledger`);
    this.name = 'SpanOverlapsRecord';
  }
}

/** The ledger refused a skipped span as inverted or empty: a caller bug, never a plan's. Counted again from the ledger. */
export class InvalidSpanError extends Error {
  constructor(job: string, from: number, to: number) {
    super(`BUG: the ledger refused the skipped span of ${job} ${iso(from)}..${iso(to)} as inverted or empty`);
    this.name = 'InvalidSpanError';
  }
}

/**
 * Records `span` of `job` under the fence, and counts it in the metrics: true once recorded, false when
 * fenced (the term is ended). Throws {@link SpanOverlapsRecord} or {@link InvalidSpanError}; either way the
 * span is to be counted again from the ledger.
 */
export async function recordSkippedSpan(term: LaneTerm, job: string, span: SkippedTicks): Promise<boolean> {
  const outcome = await term.ledger.skipRange(term.token, job, span);
  term.reached();
  switch (outcome) {
    case 'fenced':
      term.fenced();
      return false;
    case 'overlaps':
      throw new SpanOverlapsRecord(job, span.from, span.to);
    case 'invalid':
      throw new InvalidSpanError(job, span.from, span.to);
    case 'recorded':
      term.metrics?.skipped(job, span.reason, span.count);
      return true;
  }
}

/**
 * A runtime schedule removed while ticks were owed (its lane ran late, or no leader ran): records the
 * ticks the removed version (and any version an edit replaced before it) owed after the newest recorded
 * one up to the removal as skipped (`removed`, `rescheduled`), then forgets those versions.
 * `knownRecorded`: the newest tick the caller knows is recorded; the ledger's watermark counts too, since
 * a write whose reply was lost may have recorded one the caller does not know of. True once done (or when
 * nothing was owed); false when the term cannot write now. Throws as {@link recordSkippedSpan} does, or a
 * Redis error, to be retried.
 */
export async function recordRemovedSpan(term: LaneTerm, job: string, knownRecorded: number | undefined): Promise<boolean> {
  const versions = await term.replacedVersions(job);
  term.reached();
  const removal = versions.at(-1);
  if (!removal?.removed) return true;
  const { lastScheduledTick } = await term.ledger.jobState(job);
  term.reached();
  const watermark = Math.max(knownRecorded ?? -Infinity, lastScheduledTick ?? -Infinity);
  // No tick recorded at all: the schedule never ran under a leader, so none of its ticks was owed a record yet.
  const owed = watermark > -Infinity ? spansOfEnded(versions, watermark, removal.endedAt) : [];
  for (const span of owed) {
    if (!(await term.waitLeading()) || !(await recordSkippedSpan(term, job, span))) return false;
    term.log.warn({ job, from: new Date(span.from), to: new Date(span.to), count: span.count, reason: span.reason }, 'recorded the ticks a removed schedule owed as skipped');
  }
  await term.forgetReplaced(job, removal.endedAt);
  return true;
}
