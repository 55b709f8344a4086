import { spansOfEnded } from '../scheduling/plan.js';
import type { LaneTerm } from './lane-term.js';

/**
 * A skipped span was refused because a tick in it was recorded after the caller read the watermark (by
 * another writer of the job in this term). Thrown to be retried: the span is counted again from the
 * ledger, which now starts past that tick.
 */
export class SpanOverlapsRecord extends Error {
  constructor(job: string, from: number, to: number) {
    super(`skipped span of ${job} ${new Date(from).toISOString()}..${new Date(to).toISOString()} covers a tick recorded meanwhile; counting it again from the ledger`);
    this.name = 'SpanOverlapsRecord';
  }
}

/**
 * A runtime schedule removed while ticks were owed (its lane ran late, or no leader ran): records the
 * ticks the removed version (and any version an edit replaced before it) owed after the newest recorded
 * one up to the removal as skipped (`removed`, `rescheduled`), then forgets those versions.
 * `knownRecorded`: the newest tick the caller knows is recorded; the ledger's watermark counts too, since
 * a write whose reply was lost may have recorded one the caller does not know of. True once done (or when
 * nothing was owed); false when the term cannot write now. Throws {@link SpanOverlapsRecord}, or a Redis
 * error, to be retried.
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
    if (!(await term.waitLeading())) return false;
    const outcome = await term.ledger.skipRange(term.token, job, span);
    term.reached();
    if (outcome === 'fenced') {
      term.fenced();
      return false;
    }
    if (outcome === 'overlaps') throw new SpanOverlapsRecord(job, span.from, span.to);
    if (outcome === 'invalid') throw new Error(`BUG: the ledger refused the removed span of ${job} as inverted or empty`);
    term.metrics?.skipped(job, span.reason, span.count);
    term.log.warn({ job, from: new Date(span.from), to: new Date(span.to), count: span.count, reason: span.reason }, 'recorded the ticks a removed schedule owed as skipped');
  }
  await term.forgetReplaced(job, removal.endedAt);
  return true;
}
