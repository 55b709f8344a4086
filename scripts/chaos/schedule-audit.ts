import type { Redis } from 'ioredis';
import { directWrites } from '../../src/redis/durability.js';
import type { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick, ticksInRange } from '../../src/scheduling/plan.js';
import { checkScheduleSpec, type JobTypes } from '../../src/schedules/spec.js';
import { ScheduleStore } from '../../src/schedules/store.js';
import type { JobWrites } from './events.js';
import type { RunRecord } from './jobs/_record.js';
import { spread, type Spread } from './report.js';
import { countWrites, type ChaosScheduleData, type ScheduleWrite } from './schedules-client.js';
import { iso, Violations, type InvariantResult, type SeenJob, type TickChecker, type TickStats } from './tick-check.js';

/**
 * How long after a write is acknowledged the leader may still act on what came before it: the schedule
 * feed's delivery and the lane's next turn. Issue 21 bounds the upsert-to-live lag at 100 ms p99 on a
 * healthy leader; the rest is the event-loop stalls of a loaded 2-core machine under faults.
 */
export const APPLY_SLACK_MS = 1_000;
/** How soon after an unrecorded tick a write that drops it is named as what left it without a record (a failover's length). */
const DROP_REACH_MS = 15_000;

/**
 * THE RULE, and its allowances (what "an edit applies from the next tick after it is acknowledged" and "a
 * remove stops the ticks once acknowledged" mean for one tick T of a schedule):
 *
 * - A version (what one write of the client made the schedule: a spec, or nothing for a remove) is *in
 *   force* at instant t if its write may have taken effect by t and no later write surely had: from the
 *   write's send (its effect is somewhere between send and acknowledgement) until the acknowledgement of
 *   the next write that was acknowledged. A write that threw is unknown: it may or may not have taken
 *   effect, so it stays in force, beside the version before it, until a later write is acknowledged.
 * - A run of T may carry the version of any instant in [T − L, T], L = H + S: a run is staged, with the
 *   data and schedule of its time, up to the stage-ahead horizon H before its tick, and is left as it
 *   was by an edit that keeps the tick ("the next tick after the acknowledgement" is the first tick not
 *   staged yet); S = {@link APPLY_SLACK_MS} is how late after an acknowledgement the leader may still stage
 *   by what came before. So an edit acknowledged at a that keeps tick T may leave T ∈ (a, a + L] with the
 *   old data. But a write that drops T (a remove, or an interval without T) takes its staged run back
 *   (`removed`, `rescheduled`) unless BullMQ had promoted it and a worker started it: a run of T with
 *   what came before such a write acknowledged at a is allowed only for T ∈ (a, a + D], D = max(S,
 *   RenewDeadline) (the "stage-ahead horizon already staged and taken back"). RenewDeadline: a leader cut
 *   off or frozen before it could take the run back leaves it to the workers, which start a staged run
 *   while its term's last stamp is younger than RenewDeadline (guarantees.md, pre-staging), and that
 *   stamp came before the write.
 * - A tick decided late, its run added at A > T (a catch-up after no leader ran, or a claim an earlier
 *   term left pending), may instead carry the version in force at some instant of [A − S, A]: "ticks
 *   owed before an edit and not yet recorded are caught up by the schedule as it now stands"
 *   (docs/schedules.md). Only a tick some version in force at [T − L, T] had, though (it was owed then:
 *   a new interval adds no tick from before its write), and only a version of the same life of the
 *   schedule as that one (no removal acknowledged between them: a re-created schedule owes no tick of
 *   the time before it).
 * - Any other run is a violation: a version applied late, early, to a tick of before its write, or a
 *   tick of a removed schedule.
 * - T is *owed* (a run, or a recorded skip, must exist) when every version in force at some instant in
 *   [T − L, T] has T among its ticks (a data edit keeps them; a changed interval makes the ticks only one
 *   version has optional around the write), and the schedule surely existed at every instant of
 *   [T − I, T], I its interval: from its creation's acknowledgement + one interval (the first tick after
 *   the write may pass while the leader learns of it), to the send of its removal (once sent, the removal
 *   may take effect, after which its ticks are neither run nor recorded). An optional tick may have
 *   neither, but what it has must agree with BullMQ as an owed one's.
 */
export interface ScheduleAuditInput {
  writes: readonly ScheduleWrite[];
  ids: readonly string[];
  /** The instances' stage-ahead horizon (H above). */
  stageAheadMs: number;
  /** The instances' RenewDeadline (in D above). */
  renewDeadlineMs: number;
  /** The job types, to compile each spec as the instances do. */
  types: JobTypes;
}

/** What the file jobs' audit shares with the schedules': the per-tick rule, Redis' records, the run log. */
export interface ScheduleAuditContext {
  checker: TickChecker;
  seen: ReadonlyMap<string, SeenJob>;
  runs: readonly RunRecord[];
  window: { from: number; to: number };
  redis: Redis;
  ledger: TickLedger;
  /** BullMQ's event streams: when each job was first added (Redis time), for a run whose job has no timestamp. */
  adds: ReadonlyMap<string, JobWrites>;
  /** The lanes judged for stalls: each schedule's owed ticks are added under its id. */
  lanes: Map<string, Array<{ tick: number; accounted: boolean; note?: string }>>;
}

export interface ScheduleAudit {
  invariants: InvariantResult[];
  /** BullMQ's jobs of the schedules' ticks recorded enqueued: judged by "every enqueued job ended". */
  enqueued: SeenJob[];
  summary: {
    schedules: number;
    writes: ReturnType<typeof countWrites>;
    /** H, S and D of the rule. */
    allowanceMs: { stageAhead: number; apply: number; drop: number };
    /** Per schedule id: its ticks in the window (owed and optional), enqueued and skipped. */
    ticks: Record<string, TickStats>;
    runs: number;
    /** For runs with a version that a later acknowledged write replaced: from that acknowledgement to the tick. */
    ranAfterEditMs: Spread | undefined;
    /** For runs of a schedule whose removal was acknowledged before the tick: from that acknowledgement to the tick. */
    ranAfterRemoveMs: Spread | undefined;
    /** Runs of ticks decided late (added after the tick) with a version written after the tick: caught up as the schedule then stood. */
    caughtUpByLaterVersion: number;
  };
}

/** A version of one schedule: what a write of the client made it, or its absence before the first write. */
interface Version {
  /** Undefined for the absence before the first write. */
  write: ScheduleWrite | undefined;
  /** Its definition as the instances compile it; undefined while the schedule does not exist. */
  job: ScheduledJob | undefined;
  everyMs: number;
}

const hasTick = (job: ScheduledJob, tick: number): boolean => nextTick(job, tick - 1) === tick;

/** One schedule's versions over time, from the client's writes: which may be in force when. */
class Timeline {
  readonly byWrite = new Map<number, Version>();
  private readonly versions: Version[] = [];
  private readonly none: Version = { write: undefined, job: undefined, everyMs: 0 };
  /** The instants at which what is in force may change: sends and acknowledgements. */
  private readonly events: number[];

  constructor(
    readonly id: string,
    readonly writes: readonly ScheduleWrite[],
    types: JobTypes,
  ) {
    for (const write of writes) {
      let job: ScheduledJob | undefined;
      if (write.spec) {
        const compiled = checkScheduleSpec(id, write.spec, types, write.sentAt);
        if (!compiled.ok) throw new Error(`the chaos client wrote a spec the API should have refused: ${compiled.errors.join('; ')}`);
        job = compiled.job;
      }
      const version: Version = { write, job, everyMs: job?.trigger.kind === 'every' ? job.trigger.everyMs : 0 };
      this.versions.push(version);
      this.byWrite.set(write.seq, version);
    }
    this.events = [...new Set(writes.flatMap((w) => (w.outcome === 'ok' ? [w.sentAt, w.answeredAt] : [w.sentAt])))].sort((a, b) => a - b);
  }

  /** The versions that may be in force at instant `t` (see the rule). */
  at(t: number): Set<Version> {
    const out = new Set<Version>();
    let k = -1;
    for (let i = 0; i < this.versions.length && this.versions[i]!.write!.sentAt <= t; i++) k = i;
    for (let m = k; m >= 0; m--) {
      const version = this.versions[m]!;
      out.add(version);
      if (version.write!.outcome === 'ok' && version.write!.answeredAt <= t) return out;
    }
    out.add(this.none);
    return out;
  }

  /** The versions that may be in force at some instant of [from, to]. */
  within(from: number, to: number): Set<Version> {
    const out = this.at(from);
    for (const t of this.events) if (t > from && t <= to) for (const version of this.at(t)) out.add(version);
    return out;
  }

  /** Every tick in the window (from, to] that some version may have run (sorted). */
  candidateTicks(window: { from: number; to: number }, lookbackMs: number): number[] {
    const ticks = new Set<number>();
    for (const [index, version] of this.versions.entries()) {
      if (!version.job) continue;
      // In force from its send until the next acknowledged write's acknowledgement, and staged up to L after.
      const ends = this.versions.slice(index + 1).find((later) => later.write!.outcome === 'ok');
      const from = Math.max(window.from, version.write!.sentAt - 1);
      const to = Math.min(window.to, ends ? ends.write!.answeredAt + lookbackMs : window.to);
      if (to > from) for (const tick of ticksInRange(version.job, from, to, Number.MAX_SAFE_INTEGER).ticks) ticks.add(tick);
    }
    return [...ticks].sort((a, b) => a - b);
  }

  /** Whether the version `write` made has `tick` among its ticks (a removal has none). */
  has(write: ScheduleWrite, tick: number): boolean {
    const job = this.byWrite.get(write.seq)?.job;
    return job !== undefined && hasTick(job, tick);
  }

  /** Whether two versions belong to one life of the schedule: no removal was acknowledged between their writes. */
  sameLife(a: Version, b: Version): boolean {
    const [from, to] = [a, b].map((v) => this.versions.indexOf(v)).sort((x, y) => x - y) as [number, number];
    return !this.versions.slice(from + 1, to).some((v) => v.write!.op === 'remove' && v.write!.outcome === 'ok');
  }

  /** The write after `write` of this schedule, if any. */
  after(write: ScheduleWrite): ScheduleWrite | undefined {
    return this.writes[this.writes.indexOf(write) + 1];
  }
}

const describe = (w: ScheduleWrite): string =>
  `#${w.seq} ${w.op}${w.spec ? ` every ${String(w.spec.every)}` : ''}, sent ${iso(w.sentAt)}, ` +
  (w.outcome === 'ok' ? `acknowledged ${iso(w.answeredAt)}${w.version === undefined ? '' : ` as version ${w.version}`}${w.removed === false ? ' (nothing to remove)' : ''}` : `unknown (threw at ${iso(w.answeredAt)}: ${w.error})`);

/**
 * Audits the runtime schedules a client wrote during the faults, as file jobs are audited: every owed tick
 * has exactly one job or a recorded skip (the same per-tick rule, and the same lanes for stalls); every
 * run is of a tick a version in force had, with that version's data (see the rule above); and every
 * acknowledged write is kept by the store. Duplicates are the run log's second runs, judged for schedules
 * and file jobs by one rule (audit.ts: secondRuns), as are the fence and "every enqueued job ended".
 */
export async function auditSchedules(input: ScheduleAuditInput, context: ScheduleAuditContext): Promise<ScheduleAudit> {
  const lookbackMs = input.stageAheadMs + APPLY_SLACK_MS;
  const dropMs = Math.max(APPLY_SLACK_MS, input.renewDeadlineMs);
  const owedTicks = new Violations();
  const versions = new Violations();
  const kept = new Violations();
  const enqueued: SeenJob[] = [];
  const ticks: Record<string, TickStats> = {};
  const afterEdit: number[] = [];
  const afterRemove: number[] = [];
  const store = new ScheduleStore(context.redis, context.ledger.keys, directWrites(context.redis));
  const stored = await store.getMany(input.ids, (error) => kept.add(error.message));
  let runCount = 0;
  let caughtUp = 0;
  for (const [index, id] of input.ids.entries()) {
    const timeline = new Timeline(id, input.writes.filter((w) => w.id === id), input.types);
    const stats: TickStats = { ticks: 0, enqueued: 0, skipped: {}, optional: 0 };
    ticks[id] = stats;
    await context.checker.load(id, owedTicks);
    const lane: Array<{ tick: number; accounted: boolean; note?: string }> = [];
    context.lanes.set(id, lane);
    const runnable = new Set<number>();
    for (const tick of timeline.candidateTicks(context.window, lookbackMs)) {
      const inForce = [...timeline.within(tick - lookbackMs, tick)].filter((v) => v.job);
      const having = inForce.filter((v) => hasTick(v.job!, tick));
      if (having.length === 0) continue;
      runnable.add(tick);
      const intervalMs = Math.max(...having.map((v) => v.everyMs));
      const existed = ![...timeline.within(tick - intervalMs, tick)].some((v) => !v.job);
      const owed = having.length === inForce.length && existed;
      // What came next: a write that drops the tick (a removal, another interval) sent soon after it
      // (within a failover's reach), before any leader recorded it, explains a gap.
      const next = timeline.writes.find((w) => w.sentAt > tick);
      const note = next && next.sentAt - tick <= DROP_REACH_MS && !timeline.has(next, tick)
        ? `; the schedule's next write (${describe(next)}), ${next.op === 'remove' ? 'its removal' : 'which has no such tick'}, was sent ${next.sentAt - tick} ms after the tick, before any leader recorded it`
        : '';
      const { accounted, enqueued: job } = context.checker.check(id, tick, owedTicks, owed, stats, note);
      if (owed) lane.push({ tick, accounted, ...(note ? { note } : {}) });
      if (job) enqueued.push(job);
    }
    // Ticks no version had that have a job or a run anyway: their records must still agree with BullMQ
    // (the run itself is judged below).
    const inWindow = (tick: number): boolean => tick > context.window.from && tick <= context.window.to;
    const strays = new Set([...context.seen.values()].filter((job) => job.name === id).map((job) => job.tick));
    for (const run of context.runs) if (run.job === id) strays.add(run.tick);
    for (const tick of [...strays].filter((t) => inWindow(t) && !runnable.has(t)).sort((a, b) => a - b)) {
      const { enqueued: job } = context.checker.check(id, tick, owedTicks, false, stats);
      if (job) enqueued.push(job);
    }

    for (const run of context.runs.filter((r) => r.job === id)) {
      runCount++;
      versions.checked++;
      const where = `${id} tick ${iso(run.tick)} (run on ${run.identity} at ${iso(run.startedAt)})`;
      const data = run.data as Partial<ChaosScheduleData> | undefined;
      const version = typeof data?.write === 'number' ? timeline.byWrite.get(data.write) : undefined;
      if (!version?.job) {
        versions.add(`${where}: its data ${JSON.stringify(run.data)} names no upsert of this schedule by the client`);
        continue;
      }
      const write = version.write!;
      const atTick = timeline.within(run.tick - lookbackMs, run.tick);
      // An acknowledged later write that drops the tick, with time to take its staged run back before it.
      const later = timeline.writes.slice(timeline.writes.indexOf(write) + 1);
      const dropper = later.find((w) => w.outcome === 'ok' && w.answeredAt <= run.tick - dropMs && !timeline.has(w, run.tick));
      if (atTick.has(version) && hasTick(version.job, run.tick) && !dropper) {
        const next = timeline.after(write);
        if (next?.outcome === 'ok' && next.answeredAt < run.tick) (next.op === 'remove' ? afterRemove : afterEdit).push(run.tick - next.answeredAt);
        continue;
      }
      // The add that ran: BullMQ's job timestamp (the producer stamps it with Redis' time). The event
      // stream's first `added` may be an add a failover of BullMQ's primary lost, and the run a later one's.
      const addedAt = run.timestamp > 0 ? run.timestamp : (context.adds.get(run.jobId)?.addedAt ?? 0);
      const owedBy = [...atTick].filter((v) => v.job && hasTick(v.job, run.tick));
      const late = addedAt > run.tick;
      if (late && hasTick(version.job, run.tick) && owedBy.some((v) => timeline.sameLife(v, version)) && timeline.within(addedAt - APPLY_SLACK_MS, addedAt).has(version)) {
        caughtUp++;
        continue;
      }
      const added = `added ${late ? `${addedAt - run.tick} ms after` : `${run.tick - addedAt} ms before`} its tick`;
      if (late && !hasTick(version.job, run.tick)) {
        // Decided (or its add retried) under a version that does not have the tick: owed by no version then.
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, whose schedule has no tick there` +
          (owedBy.length > 0 ? ` (write ${describe(owedBy[0]!.write!)} owed it)` : ''));
      } else if (late && owedBy.length > 0 && !owedBy.some((v) => timeline.sameLife(v, version))) {
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, of the schedule's life after a removal; the tick was owed by write ${describe(owedBy[0]!.write!)}, before it: a re-created schedule ran a tick of its previous life`);
      } else if (write.sentAt > run.tick) {
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, sent ${write.sentAt - run.tick} ms after the tick, which ` +
          `${owedBy.length === 0 ? 'no version in force then had' : `write ${describe(owedBy[0]!.write!)} owed`}: a version applied to a tick before it was written`);
      } else if (!hasTick(version.job, run.tick)) {
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, whose schedule has no tick there`);
      } else if (dropper && !late) {
        // A removal followed by a re-creation before the run: a leader after both never saw the removal.
        const recreated = dropper.op === 'remove' ? later.find((w) => w.seq > dropper.seq && w.op === 'create' && w.sentAt < run.startedAt) : undefined;
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, after write ${describe(dropper)}, ${run.tick - dropper.answeredAt} ms before the tick, ` +
          `which has no such tick (${dropper.op === 'remove' ? 'a removal' : 'another interval'}): its staged run was not taken back (allowance ${dropMs} ms)` +
          (recreated ? `; the schedule was re-created by write ${describe(recreated)} before the run` : ''));
      } else {
        // Superseded before the instant that counts: the tick (less L) when staged, its add (less S) when decided late.
        const by = late ? addedAt - APPLY_SLACK_MS : run.tick - lookbackMs;
        const ended = later.find((w) => w.outcome === 'ok' && w.answeredAt <= by);
        versions.add(`${where}: ${added}, ran with write ${describe(write)}, ` +
          (ended ? `superseded by write ${describe(ended)}, ${(late ? addedAt : run.tick) - ended.answeredAt} ms before its ${late ? 'add' : 'tick'}` : 'no version in force at its tick or its add') +
          `: past the allowance of ${late ? `${APPLY_SLACK_MS} ms before its add` : `${lookbackMs} ms (stage-ahead ${input.stageAheadMs} + apply ${APPLY_SLACK_MS})`}` +
          (ended?.op === 'remove' ? ': a tick of a removed schedule ran' : ''));
      }
    }
    // A job in BullMQ for a window tick no version had, that has not run (a run is judged above).
    for (const job of context.seen.values()) {
      if (job.name !== id || !inWindow(job.tick) || runnable.has(job.tick)) continue;
      versions.checked++;
      if (job.state !== 'completed' && job.state !== 'failed') versions.add(`${id} tick ${iso(job.tick)}: BullMQ holds ${job.id} (${job.state}), a tick no version of the schedule had at the time`);
    }
    keptWrites(id, timeline.writes, stored[index], kept);
  }
  const lookback = `${lookbackMs} ms (stage-ahead ${input.stageAheadMs} + apply ${APPLY_SLACK_MS})`;
  return {
    invariants: [
      owedTicks.result(
        'runtime schedules: every tick a version surely owed (from its creation\'s acknowledgement + one interval to the send of its removal) has exactly one job or a recorded skip; a tick around a write has no more',
        { settles: true },
      ),
      versions.result(
        `runtime schedules: every run is of a tick of a version in force at most ${lookback} before it, with that version's data, or, decided late, ` +
          `of the version in force when it was added (the same life of the schedule); none of a removed schedule, none of a tick before its version`,
      ),
      kept.result('runtime schedules: every acknowledged write is kept (each acknowledged version follows those before it; the store ends as the acknowledged writes left it)'),
    ],
    enqueued,
    summary: {
      schedules: input.ids.length,
      writes: countWrites(input.writes),
      allowanceMs: { stageAhead: input.stageAheadMs, apply: APPLY_SLACK_MS, drop: dropMs },
      ticks,
      runs: runCount,
      ranAfterEditMs: spread(afterEdit),
      ranAfterRemoveMs: spread(afterRemove),
      caughtUpByLaterVersion: caughtUp,
    },
  };
}

/**
 * The store against the acknowledgements, per schedule: an acknowledged upsert's version follows the
 * versions possible before it (one more than the last acknowledged, or than an unknown write after it; 1
 * after a removal), a remove finds a schedule exactly when one may be stored, and what the store holds at
 * the end is what the last acknowledged write (or an unknown one after it) left.
 */
function keptWrites(id: string, writes: readonly ScheduleWrite[], stored: { version: number; spec: { data?: unknown } } | undefined, kept: Violations): void {
  // The stored version may be any of [lo, hi] (0: none), holding the data of one of `candidates` (0: none).
  let lo = 0;
  let hi = 0;
  let candidates = new Set<number>([0]);
  for (const write of writes) {
    kept.checked++;
    if (write.op !== 'remove') {
      if (write.outcome === 'unknown') {
        hi++;
        candidates.add(write.seq);
        continue;
      }
      const version = write.version!;
      if (version < lo + 1 || version > hi + 1) {
        kept.add(`${id}: write ${describe(write)}, but the writes before it allow versions ${lo + 1}–${hi + 1}: an acknowledged write was lost, or a version given twice`);
      }
      lo = hi = version;
      candidates = new Set([write.seq]);
    } else {
      if (write.outcome === 'unknown') {
        lo = 0;
        candidates.add(0);
        continue;
      }
      if (write.removed && hi === 0) kept.add(`${id}: write ${describe(write)} removed a schedule, though none the client wrote can be stored`);
      if (!write.removed && lo > 0) kept.add(`${id}: write ${describe(write)} found no schedule, though version ${lo} was acknowledged: an acknowledged write was lost`);
      lo = hi = 0;
      candidates = new Set([0]);
    }
  }
  kept.checked++;
  const seq = stored ? Number((stored.spec.data as Partial<ChaosScheduleData> | undefined)?.write) : 0;
  const version = stored?.version ?? 0;
  if (!candidates.has(seq) || version < lo || version > hi) {
    kept.add(`${id}: the store ends holding ${stored ? `version ${version} of write #${seq}` : 'no schedule'}; the client's writes leave ` +
      `${[...candidates].map((c) => (c === 0 ? 'none' : `write #${c}`)).join(' or ')} at version ${lo === hi ? lo : `${lo}–${hi}`}`);
  }
}
