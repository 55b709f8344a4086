import type { Job, JobType, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { LogLine } from '../../test/support/instance.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
import type { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { ticksInRange } from '../../src/scheduling/plan.js';
import type { JobWrites } from './events.js';
import type { ExecutedFault } from './faults.js';
import { DELIBERATE_FAILURE, type RunEndRecord, type RunRecord } from './jobs/_record.js';
import { SAMPLE_MS, type LeaseHistorySnapshot, type LeaseRecordWrite } from './lease-history.js';
import { AIMED_KILLS, type ElectionTimings } from './plan.js';
import { auditSchedules, type ScheduleAudit, type ScheduleAuditInput } from './schedule-audit.js';
import { iso, TickChecker, Violations, type InvariantResult, type SeenJob, type TickStats } from './tick-check.js';

export { Violations, type InvariantResult, type TickStats } from './tick-check.js';

/** A leadership term as the fence history shows it: when its leader raised the fence, and its enqueues. */
export interface TermSummary {
  rank: number;
  identity: string;
  token: string;
  raisedAt: number;
  enqueues: number;
  firstWrite?: number;
  lastWrite?: number;
}

/** A failover: from a fault to the first enqueue written under a term raised after it. */
export interface FailoverGap {
  fault: number;
  kind: string;
  wasLeader: boolean;
  gapMs: number;
}

export interface Audit {
  invariants: InvariantResult[];
  ticks: Record<string, TickStats>;
  terms: TermSummary[];
  failovers: FailoverGap[];
  /** Enqueue lag of window jobs: Redis write time minus nominal tick (catch-up runs included). */
  lagMs: number[];
  /** Handler runs per enqueued window job, e.g. `{ "1": 812, "2": 3 }`: 2 is a re-run after a stall. */
  runsPerJob: Record<string, number>;
  /** Every second handler run of one job id: those a death of the first runner explains, and the duplicates. */
  secondRuns: { explained: SecondRun[]; duplicates: SecondRun[] };
  /** Adds that BullMQ turned away because the job id already existed (harmless by design). */
  repeatedAdds: number;
  /** Longest stretch without an enqueue of the per-second job inside the window. */
  longestSilenceMs: number;
  /** Window jobs whose write time came from the job timestamp because no `added` event was seen. */
  writesWithoutEvent: number;
  /** The lock's own history: how many writes, from where, and the holding stretches it shows. */
  lease: { writes: number; source: LeaseHistorySnapshot['source']; holderChanges: number; stretches: number; longestUnexcusedSilenceMs: number; lostInFailover: number };
  /** The runtime schedules a client wrote during the faults, when it ran (see schedule-audit.ts). */
  schedules?: ScheduleAudit['summary'];
}

export interface AuditInput {
  jobs: ScheduledJob[];
  /** Ticks in `(from, to]` are checked. */
  window: { from: number; to: number };
  redis: Redis;
  ledger: TickLedger;
  /** The queues the jobs use, by name. */
  queues: Map<string, Queue>;
  logs: Array<{ identity: string; line: LogLine }>;
  writes: ReadonlyMap<string, JobWrites>;
  runs: RunRecord[];
  faults: ExecutedFault[];
  /** The job whose silences are measured. */
  steadyJob: string;
  /** The lock's own write history (fake API server, or the Redis lock's history stream). */
  lease: LeaseHistorySnapshot;
  /** Ends of runs of the jobs whose runs must not overlap. */
  runEnds: RunEndRecord[];
  /** When each process incarnation exited, by identity (a run cut off by a crash ended then). */
  exits: ReadonlyMap<string, number>;
  timings: ElectionTimings;
  /** The schedules client's writes, when one ran: the audit covers its schedules as it covers file jobs. */
  schedules?: Omit<ScheduleAuditInput, 'types'>;
}

const STATES: JobType[] = ['completed', 'failed', 'active', 'waiting', 'delayed', 'prioritized', 'waiting-children'];
/** How long after a fault ends a new term still counts as its failover. */
const FAILOVER_ATTRIBUTION_MS = 15_000;

interface Raise {
  identity: string;
  token: string;
  transitions: number;
  generation: string;
  at: number;
}


const tokenKey = (token: { generation: string; leaderTransitions: number } | undefined): string =>
  token ? `${token.generation}#${token.leaderTransitions}` : 'none';


/** Reads every job of the queues once, with its state and the time Redis wrote it. */
async function readJobs(queues: Map<string, Queue>, writes: ReadonlyMap<string, JobWrites>, ground: { redis: Redis; ledger: TickLedger }): Promise<{ jobs: Map<string, SeenJob>; withoutEvent: Set<string> }> {
  const jobs = new Map<string, SeenJob>();
  const withoutEvent = new Set<string>();
  for (const queue of queues.values()) {
    for (const state of STATES) {
      for (const job of (await queue.getJobs([state], 0, -1, true)) as Array<Job<TickJobData>>) {
        const id = String(job.id);
        const write = writes.get(id);
        if (!write) withoutEvent.add(id);
        jobs.set(id, {
          id,
          name: job.name,
          tick: job.data.tick,
          token: tokenKey(job.data.token),
          state,
          failedReason: job.failedReason ?? '',
          writtenAt: write?.addedAt ?? job.timestamp,
          ...(state === 'completed' || state === 'failed' ? {} : { pending: await whyPending(job, ground) }),
        });
      }
    }
  }
  return { jobs, withoutEvent };
}

/**
 * What a job not finished yet shows of why: BullMQ's counts and times, its starts as leasebeat recorded
 * them, its staging term and due time, the job's review mark and the fence (a staged run waits for both).
 */
async function whyPending(job: Job<TickJobData>, { redis, ledger }: { redis: Redis; ledger: TickLedger }): Promise<string> {
  const [starts, runner] = await redis.hmget(`${job.queueQualifiedName}:${job.id}`, 'leasebeatStarts', 'leasebeatRunner');
  const reviewedBy = await redis.hget(ledger.keys.jobState(job.name), 'reviewedBy');
  const fence = await redis.hmget(ledger.keys.fence, 'generation', 'transitions', 'aliveAt');
  return JSON.stringify({
    attemptsMade: job.attemptsMade,
    stalled: job.stalledCounter,
    processedOn: job.processedOn,
    delayUntil: job.delay ? job.timestamp + job.delay : undefined,
    dueAt: job.data.dueAt,
    stagedBy: job.data.token,
    starts,
    runner,
    reviewedBy,
    fence,
  });
}

/**
 * The fence history from the instances' logs: each term's first raise, oldest first. (A term whose setup
 * failed, e.g. during a Redis restart, raises the fence to its own token again; that moves nothing.)
 */
function fenceHistory(logs: AuditInput['logs']): Raise[] {
  const raises: Raise[] = [];
  for (const { identity, line } of logs) {
    if (line.msg !== 'fence raised; producing') continue;
    const term = line.term as { generation: string; leaderTransitions: number } | undefined;
    if (!term) continue;
    raises.push({ identity, token: tokenKey(term), transitions: term.leaderTransitions, generation: term.generation, at: line.time });
  }
  raises.sort((a, b) => a.at - b.at);
  const seen = new Set<string>();
  return raises.filter((raise) => !seen.has(raise.token) && seen.add(raise.token));
}

/** Checks the four invariants (and that the fence only moves forward) and gathers the run's statistics. */
export async function audit(input: AuditInput): Promise<Audit> {
  const { jobs: seen, withoutEvent } = await readJobs(input.queues, input.writes, input);
  const raises = fenceHistory(input.logs);
  const rank = new Map(raises.map((raise, index) => [raise.token, index]));
  const runsByJob = new Map<string, RunRecord[]>();
  for (const run of input.runs) runsByJob.set(run.jobId, [...(runsByJob.get(run.jobId) ?? []), run]);

  // 1. Every (job, nominal tick) in the window: exactly one job, or a recorded skip with its reason.
  const exactlyOnce = new Violations();
  const checker = new TickChecker({ redis: input.redis, ledger: input.ledger, seen, runsByJob, writes: input.writes });
  const ticks: Record<string, TickStats> = {};
  const windowJobs: SeenJob[] = [];
  /** Per job, its due ticks in the window and whether each was run or recorded at all (for the stalls). */
  const lanes = new Map<string, Array<{ tick: number; accounted: boolean; note?: string }>>();
  // Job types (neither schedule nor every) never tick by themselves: their schedules are audited below.
  for (const job of input.jobs.filter((j) => j.trigger.kind !== 'none')) {
    const stats: TickStats = { ticks: 0, enqueued: 0, skipped: {} };
    ticks[job.name] = stats;
    await checker.load(job.name, exactlyOnce);
    const { ticks: due } = ticksInRange(job, input.window.from, input.window.to, Number.MAX_SAFE_INTEGER);
    const lane: Array<{ tick: number; accounted: boolean }> = [];
    lanes.set(job.name, lane);
    for (const tick of due) {
      const { accounted, enqueued } = checker.check(job.name, tick, exactlyOnce, true, stats);
      lane.push({ tick, accounted });
      if (enqueued) windowJobs.push(enqueued);
    }
  }
  // The runtime schedules a client wrote during the faults, by the same per-tick rule (their lanes too).
  const schedules = input.schedules
    ? await auditSchedules({ ...input.schedules, types: new Map(input.jobs.map((job) => [job.name, job])) }, { checker, seen, runs: input.runs, window: input.window, redis: input.redis, ledger: input.ledger, adds: input.writes, lanes })
    : undefined;
  // No job for a window tick may exist outside the ledger's deterministic id (e.g. a second id for one tick).
  const perTick = new Map<string, string[]>();
  for (const job of seen.values()) {
    if (job.tick <= input.window.from || job.tick > input.window.to) continue;
    const key = `${job.name}@${job.tick}`;
    perTick.set(key, [...(perTick.get(key) ?? []), job.id]);
  }
  for (const [key, ids] of perTick) if (ids.length > 1) exactlyOnce.add(`${key}: ${ids.length} BullMQ jobs (${ids.join(', ')})`);

  // 2. No enqueue carries a token lower than the fence at the time of its write; and (ground truth) every
  //    token an enqueue carries was granted by the lock to some holder.
  const fenced = new Violations();
  const granted = new Set(input.lease.writes.filter((w) => w.holder !== '').map(leaseToken));
  for (const job of seen.values()) {
    fenced.checked++;
    if (input.lease.source !== 'sampled' && !granted.has(job.token)) fenced.add(`job ${job.id} carries token ${job.token}, which the lock's history never granted`);
    const own = rank.get(job.token);
    if (own === undefined) {
      fenced.add(`job ${job.id} carries token ${job.token}, which no leader ever raised the fence to`);
      continue;
    }
    const fenceAt = lastIndexAtOrBefore(raises, job.writtenAt);
    if (fenceAt > own) {
      const newer = raises[fenceAt]!;
      fenced.add(
        `job ${job.id} (token ${job.token}) was written at ${iso(job.writtenAt)}, after ${newer.identity} raised the fence to ${newer.token} at ${iso(newer.at)}`,
      );
    }
  }

  // 3. Every enqueued job ended completed, or failed by its own handler; none vanished.
  const finished = new Violations();
  const runsPerJob: Record<string, number> = {};
  for (const job of [...windowJobs, ...(schedules?.enqueued ?? [])]) {
    finished.checked++;
    const runs = runsByJob.get(job.id)?.length ?? 0;
    runsPerJob[String(runs)] = (runsPerJob[String(runs)] ?? 0) + 1;
    if (job.state === 'completed') {
      if (runs === 0) finished.add(`job ${job.id} completed without its handler having run`);
    } else if (job.state === 'failed') {
      if (!job.failedReason.startsWith(DELIBERATE_FAILURE)) finished.add(`job ${job.id} failed, but not by its handler: ${job.failedReason}`);
    } else {
      finished.add(`job ${job.id} is still ${job.state} after the drain: ${job.pending ?? ''}`);
    }
  }

  // 4. Leader terms never overlap in their enqueues.
  const terms = termSummaries(raises, seen);
  const disjoint = new Violations();
  const written = terms.filter((t) => t.firstWrite !== undefined);
  for (let i = 1; i < written.length; i++) {
    disjoint.checked++;
    const previous = written[i - 1]!;
    const current = written[i]!;
    if (previous.lastWrite! >= current.firstWrite!) {
      disjoint.add(
        `term ${previous.token} (${previous.identity}) enqueued until ${iso(previous.lastWrite!)}, ` +
          `after term ${current.token} (${current.identity}) began enqueuing at ${iso(current.firstWrite!)}`,
      );
    }
  }

  // 5. The fence only moves forward: each raise is to a later term than the one before.
  const forward = new Violations();
  for (let i = 1; i < raises.length; i++) {
    forward.checked++;
    const previous = raises[i - 1]!;
    const current = raises[i]!;
    if (current.generation === previous.generation && current.transitions <= previous.transitions) {
      forward.add(`${current.identity} raised the fence to ${current.token} after ${previous.identity} had raised it to ${previous.token}`);
    }
  }

  const lease = leaseInvariants(input.lease);
  const serial = serialRuns(input.jobs, input.runs, input.runEnds, input.exits);
  const producing = holdersProduce(input, seen);
  const again = secondRuns(input.runs, input.runEnds, input.exits, input.faults);
  const stalls = laneStalls(lanes, input.faults);

  return {
    invariants: [
      exactlyOnce.result('every (job, nominal tick) in the window has exactly one job, or a recorded skip with its reason', { settles: true }),
      fenced.result('no enqueue carries a token lower than the fence at the time of its write'),
      finished.result('every enqueued job ended completed, or failed by its own handler; none vanished', { settles: true }),
      disjoint.result("leader terms never overlap in their enqueues ([first, last] write per term)"),
      forward.result('the fence only moves forward (leaderTransitions rise from term to term)'),
      lease.l1.result('L1 (lock history): leaseTransitions never decrease across writes within one generation'),
      lease.l2.result('L2 (lock history): no fencing token is held by two holders or in two terms'),
      lease.l3.result("L3 (lock history): no holder change while the previous holder's lease was live"),
      serial.result('no two runs of a skip/bufferOne job at once, and runs in tick order'),
      producing.violations.result(`no lease holder goes without enqueuing for longer than RenewDeadline + ${PRODUCE_SLACK_MS} ms while it reaches Redis, nor keeps renewing that long once cut from Redis (lock history vs enqueues)`),
      again.violations.result('no job id runs twice, unless the process of its previous run died before that run could finish (a stalled re-run after a Redis failover is a duplicate)'),
      checker.lost.result('no tick recorded enqueued whose run never ran and is not in BullMQ (a lost add, e.g. a staged run)'),
      stalls.result(`no job's lane stalls: no ${STALL_TICKS} or more consecutive due ticks neither run nor recorded`),
      ...(schedules?.invariants ?? []),
    ],
    ticks,
    terms,
    failovers: failoverGaps(input.faults, raises, seen, rank),
    lagMs: windowJobs.map((job) => job.writtenAt - job.tick).sort((a, b) => a - b),
    runsPerJob,
    secondRuns: { explained: again.explained, duplicates: again.duplicates },
    repeatedAdds: [...input.writes.values()].reduce((sum, w) => sum + w.repeats.length, 0),
    longestSilenceMs: longestSilence(windowJobs.filter((j) => j.name === input.steadyJob).map((j) => j.writtenAt)),
    writesWithoutEvent: windowJobs.filter((j) => withoutEvent.has(j.id)).length,
    lease: {
      writes: input.lease.writes.length,
      source: input.lease.source,
      holderChanges: lease.holderChanges,
      stretches: producing.stretches,
      longestUnexcusedSilenceMs: producing.longest,
      lostInFailover: input.lease.lostInFailover ?? 0,
    },
    ...(schedules ? { schedules: schedules.summary } : {}),
  };
}

const leaseToken = (w: { generation: string; transitions: number }): string => `${w.generation}#${w.transitions}`;
const describeWrite = (w: LeaseRecordWrite): string =>
  `${w.op} v${w.version} at ${iso(w.at)} by ${w.holder === '' ? '(released)' : w.holder}, token ${leaseToken(w)}`;

/** Whether two writes left the same record content (what a follower compares), versions aside. */
const sameContent = (a: LeaseRecordWrite, b: LeaseRecordWrite): boolean =>
  a.op !== 'delete' && b.op !== 'delete' && a.holder === b.holder && a.transitions === b.transitions && a.generation === b.generation &&
  a.acquire === b.acquire && a.renew === b.renew && a.durationMs === b.durationMs;

/** L1–L3, judged from the lock's own write history. */
export function leaseInvariants(history: LeaseHistorySnapshot): { l1: Violations; l2: Violations; l3: Violations; holderChanges: number } {
  const writes = history.writes;
  const l1 = new Violations();
  const l2 = new Violations();
  const l3 = new Violations();
  // Server times against the followers' own clocks on the same machine: ms rounding only, unless the
  // history was sampled (then a write is seen up to one poll late).
  const tolerance = history.source === 'sampled' ? 2 * SAMPLE_MS : 2;
  const tokens = new Map<string, { holder: string; lastIndex: number }>();
  let lastHeld: { token: string; index: number } | undefined;
  let holderChanges = 0;
  for (const [index, write] of writes.entries()) {
    const previous = index > 0 ? writes[index - 1] : undefined;
    // L1: within one generation (a recreated record starts a new one), transitions only rise.
    if (previous && previous.op !== 'delete' && write.op !== 'delete' && previous.generation === write.generation) {
      l1.checked++;
      if (write.transitions < previous.transitions) l1.add(`transitions went from ${previous.transitions} to ${write.transitions}: ${describeWrite(previous)} → ${describeWrite(write)}`);
    }
    if (write.holder !== '' && write.op !== 'delete') {
      // L2: a token belongs to one holder, in one unbroken term (releases aside).
      l2.checked++;
      const token = leaseToken(write);
      const owner = tokens.get(token);
      if (owner && owner.holder !== write.holder) l2.add(`token ${token} held by ${owner.holder} and then by ${write.holder} (${describeWrite(write)})`);
      else if (owner && lastHeld && lastHeld.token !== token) {
        l2.add(`token ${token} of ${write.holder} held again after token ${lastHeld.token} (${describeWrite(writes[lastHeld.index]!)}): a second term with one token (${describeWrite(write)})`);
      }
      tokens.set(token, { holder: write.holder, lastIndex: index });
      lastHeld = { token, index };
    }
    // L3: another holder may write only once the previous holder's lease has run out since its record last
    // changed (followers restart their countdown only on a change, as in client-go: a rewrite of the same
    // content, e.g. a retried write, extends nothing); a release (empty holder) or a deleted record frees
    // it at once.
    if (previous && previous.holder !== '' && previous.op !== 'delete' && write.holder !== '' && write.holder !== previous.holder) {
      holderChanges++;
      l3.checked++;
      let changed = index - 1;
      while (changed > 0 && sameContent(writes[changed - 1]!, writes[changed]!)) changed--;
      const gap = write.at - writes[changed]!.at;
      if (gap + tolerance < previous.durationMs) {
        l3.add(`${write.holder} wrote the lease ${gap} ms after ${previous.holder}'s last change, whose lease was ${previous.durationMs} ms: ${describeWrite(writes[changed]!)} → ${describeWrite(write)}`);
      }
    }
  }
  return { l1, l2, l3, holderChanges };
}

/** No two runs of a `skip` / `bufferOne` job at once, and its runs in tick order (a re-run of one tick aside). */
export function serialRuns(
  jobs: ReadonlyArray<Pick<ScheduledJob, 'name' | 'overlap'>>,
  allRuns: RunRecord[],
  runEnds: RunEndRecord[],
  exits: ReadonlyMap<string, number>,
): Violations {
  const violations = new Violations();
  const ends = new Map(runEnds.map((end) => [`${end.jobId}|${end.identity}|${end.startedAt}`, end.finishedAt]));
  for (const job of jobs.filter((j) => j.overlap !== 'allow')) {
    const runs = allRuns
      .filter((run) => run.job === job.name)
      .map((run) => ({
        run,
        end: ends.get(`${run.jobId}|${run.identity}|${run.startedAt}`) ?? exits.get(run.identity) ?? Infinity,
      }))
      .sort((a, b) => a.run.startedAt - b.run.startedAt);
    let latest: (typeof runs)[number] | undefined;
    let highest: RunRecord | undefined;
    for (const current of runs) {
      violations.checked++;
      const { run } = current;
      if (latest && latest.end > run.startedAt) {
        violations.add(`${job.name} (${job.overlap}): tick ${iso(run.tick)} started on ${run.identity} at ${iso(run.startedAt)} while tick ` +
          `${iso(latest.run.tick)} ran on ${latest.run.identity} (${iso(latest.run.startedAt)} – ${Number.isFinite(latest.end) ? iso(latest.end) : 'never ended'})`);
      }
      if (highest && run.tick < highest.tick) {
        violations.add(`${job.name} (${job.overlap}): tick ${iso(run.tick)} ran at ${iso(run.startedAt)}, after tick ${iso(highest.tick)} had run (${iso(highest.startedAt)})`);
      }
      if (!latest || current.end > latest.end) latest = current;
      if (!highest || run.tick > highest.tick) highest = run;
    }
  }
  return violations;
}

/** A later handler run of one job id, the run before it, and the death of that run's process if one explains it. */
export interface SecondRun {
  jobId: string;
  previous: Pick<RunRecord, 'identity' | 'startedAt' | 'attemptsMade'>;
  again: Pick<RunRecord, 'identity' | 'startedAt' | 'attemptsMade'>;
  /** The previous runner's process exit, and the fault that ended it (from the fault log) if one did. */
  death?: { at: number; fault?: number; kind?: string };
  /** The fault that most likely caused it: one aimed at this very run, else the first under way between the two runs. */
  cause?: { fault: number; kind: string; aimedAtThis: boolean };
}

/**
 * How long after its handler returned (its end record, else its start) a run's process may die and still
 * explain a run again: its completion may not have been written yet. Far shorter than a re-run takes
 * (the lock expires in 30 s), so a later, unrelated kill of that process does not excuse a duplicate.
 */
export const COMPLETION_SLACK_MS = 5_000;

/**
 * Every handler run of a job id after its first, from the run log: explained when the process of the
 * run before it exited between that run's start and this one (within {@link COMPLETION_SLACK_MS} of its
 * end), as at-least-once processing allows; a DUPLICATE otherwise, whatever BullMQ calls it (a "stalled"
 * job whose completion a Redis failover lost is one).
 */
export function secondRuns(
  runs: RunRecord[],
  runEnds: RunEndRecord[],
  exits: ReadonlyMap<string, number>,
  faults: ExecutedFault[],
): { violations: Violations; explained: SecondRun[]; duplicates: SecondRun[] } {
  const violations = new Violations();
  const explained: SecondRun[] = [];
  const duplicates: SecondRun[] = [];
  const ends = new Map(runEnds.map((end) => [`${end.jobId}|${end.identity}|${end.startedAt}`, end.finishedAt]));
  const byId = new Map<string, RunRecord[]>();
  for (const run of runs) byId.set(run.jobId, [...(byId.get(run.jobId) ?? []), run]);
  const pick = (run: RunRecord): SecondRun['again'] => ({ identity: run.identity, startedAt: run.startedAt, attemptsMade: run.attemptsMade });
  for (const [jobId, all] of byId) {
    const sorted = [...all].sort((a, b) => a.startedAt - b.startedAt);
    violations.checked += sorted.length;
    for (let i = 1; i < sorted.length; i++) {
      const previous = sorted[i - 1]!;
      const again = sorted[i]!;
      const end = ends.get(`${previous.jobId}|${previous.identity}|${previous.startedAt}`) ?? previous.startedAt;
      const exit = exits.get(previous.identity);
      const died = exit !== undefined && exit >= previous.startedAt && exit <= again.startedAt && exit <= end + COMPLETION_SLACK_MS;
      const between = faults.filter((f) => f.endedAt >= previous.startedAt && f.startedAt <= again.startedAt && !f.detail.startsWith('skipped'));
      const cause = between.find((f) => f.aim?.jobId === jobId) ?? between[0];
      const entry: SecondRun = {
        jobId,
        previous: pick(previous),
        again: pick(again),
        ...(cause ? { cause: { fault: cause.index, kind: cause.kind, aimedAtThis: cause.aim?.jobId === jobId } } : {}),
      };
      if (died) {
        const killer = faults.filter((f) => f.target === previous.identity && f.startedAt <= exit).at(-1);
        explained.push({ ...entry, death: { at: exit, ...(killer ? { fault: killer.index, kind: killer.kind } : {}) } });
        continue;
      }
      duplicates.push(entry);
      violations.add(`DUPLICATE ${jobId}: ran on ${again.identity} at ${iso(again.startedAt)} (attemptsMade ${again.attemptsMade}), ` +
        `${again.startedAt - previous.startedAt} ms after its run on ${previous.identity} at ${iso(previous.startedAt)} (attemptsMade ${previous.attemptsMade}), ` +
        `whose process ${exit === undefined || exit > again.startedAt ? 'was still running' : `died only ${exit - end} ms after that run's ${end === previous.startedAt ? 'start' : 'end'}`}` +
        (cause ? `; fault in between: #${cause.index} ${cause.kind}${entry.cause!.aimedAtThis ? ' (aimed at this run)' : ''}` : ''));
    }
  }
  return { violations, explained, duplicates };
}

/** A lane has stalled when this many consecutive due ticks of its job were neither run nor recorded. */
export const STALL_TICKS = 2;

/**
 * A job whose lane stops: a stretch of at least {@link STALL_TICKS} consecutive due ticks that have neither
 * a run nor any ledger record (nor a skipped range), blamed on the fault injected last before it. (A lone
 * missing tick is the exactly-once invariant's.)
 */
export function laneStalls(lanes: ReadonlyMap<string, ReadonlyArray<{ tick: number; accounted: boolean; note?: string }>>, faults: ExecutedFault[]): Violations {
  const violations = new Violations();
  for (const [job, ticks] of lanes) {
    violations.checked++;
    for (let i = 0; i < ticks.length; i++) {
      if (ticks[i]!.accounted) continue;
      let j = i;
      while (j + 1 < ticks.length && !ticks[j + 1]!.accounted) j++;
      const from = ticks[i]!.tick;
      if (j - i + 1 >= STALL_TICKS) {
        const fault = faults.filter((f) => f.startedAt <= from && !f.detail.startsWith('skipped')).at(-1);
        violations.add(`${job}: ${j - i + 1} consecutive ticks ${iso(from)} – ${iso(ticks[j]!.tick)} neither run nor recorded` +
          (j === ticks.length - 1 ? ' (through the end of the window)' : '') +
          (fault ? `; last fault before: #${fault.index} ${fault.kind} at ${iso(fault.startedAt)}` : '') +
          (ticks[j]!.note ?? ''));
      }
      i = j;
    }
  }
  return violations;
}

/** Writes this close to a partition's heal may be held bytes it delivered, not writes made during the cut. */
const HEAL_MARGIN_MS = 100;
/** Extra allowance, beyond RenewDeadline, for a holder's silence: one period of the per-second job, and setup. */
const PRODUCE_SLACK_MS = 2000;

/**
 * No term in which the lease holder does not produce: for each stretch of the lock's history in which one
 * holder keeps one token, the holder's enqueues under that token (Redis write times) must not pause for
 * longer than RenewDeadline + slack, not counting time in which a fault kept it from Redis (a Redis
 * restart or pause, a partition of its Redis path, being stopped). And a holder cut from Redis stops
 * renewing within the same bound.
 */
function holdersProduce(input: AuditInput, jobs: Map<string, SeenJob>): { violations: Violations; stretches: number; longest: number } {
  const violations = new Violations();
  const bound = input.timings.renewDeadlineMs + PRODUCE_SLACK_MS;
  const enqueues = new Map<string, number[]>();
  for (const job of jobs.values()) enqueues.set(job.token, [...(enqueues.get(job.token) ?? []), job.writtenAt]);
  for (const times of enqueues.values()) times.sort((a, b) => a - b);
  const stretches: Array<{ holder: string; token: string; from: number; to: number }> = [];
  let previous: LeaseRecordWrite | undefined;
  for (const write of input.lease.writes) {
    const token = leaseToken(write);
    const held = write.holder !== '' && write.op !== 'delete';
    const continues = held && previous && previous.op !== 'delete' && previous.holder === write.holder && leaseToken(previous) === token;
    if (continues) stretches.at(-1)!.to = write.at;
    else if (held) stretches.push({ holder: write.holder, token, from: write.at, to: write.at });
    previous = write;
  }
  // A holder cut from Redis cannot produce, so it must not keep the lease either: once RenewDeadline +
  // slack has passed in the cut, it writes no more renewals (with the Redis lock it cannot; with the
  // Kubernetes lock it still reaches the API server and must give the lease up itself).
  for (const fault of input.faults) {
    if ((fault.kind !== 'partition-redis' && fault.kind !== 'partition-leader-redis-only') || !fault.target || fault.detail.startsWith('skipped')) continue;
    for (const stretch of stretches.filter((st) => st.holder === fault.target && st.to >= fault.startedAt && st.from <= fault.endedAt)) {
      violations.checked++;
      // Held when cut, or taken (Kubernetes lock) while cut: either way the bound runs from then. Only
      // writes inside the cut count: a heal that delivers held bytes lands renewals at its very end.
      const since = Math.max(fault.startedAt, stretch.from);
      const late = input.lease.writes.filter(
        (w) => w.holder === stretch.holder && leaseToken(w) === stretch.token && w.at > since + bound && w.at < fault.endedAt - HEAL_MARGIN_MS,
      );
      if (late.length > 0) {
        violations.add(`${fault.target} was cut from Redis from ${iso(fault.startedAt)} to ${iso(fault.endedAt)} (fault #${fault.index}) and still renewed the lease ` +
          `(token ${stretch.token}) ${late.length} time(s) later than ${bound} ms into the cut, the last at ${iso(late.at(-1)!.at)}: nobody else could lead meanwhile`);
      }
    }
  }
  let longest = 0;
  for (const stretch of stretches) {
    const excused = excusedIntervals(input, stretch.holder);
    const times = (enqueues.get(stretch.token) ?? []).filter((t) => t > stretch.from && t < stretch.to);
    const points = [stretch.from, ...times, stretch.to];
    violations.checked++;
    for (let i = 1; i < points.length; i++) {
      const from = Math.max(points[i - 1]!, input.window.from);
      const to = points[i]!;
      if (to <= from) continue;
      const silent = to - from - overlap(from, to, excused);
      longest = Math.max(longest, silent);
      if (silent > bound) {
        violations.add(`${stretch.holder} held the lease (token ${stretch.token}) from ${iso(from)} to ${iso(to)} and enqueued nothing under it for ${silent} ms ` +
          `(lease writes ${iso(stretch.from)} – ${iso(stretch.to)}; ${times.length} enqueues in the stretch)`);
      }
    }
  }
  return { violations, stretches: stretches.length, longest };
}

/** Faults of a replicated Redis: until the keys' primary (again) has a replica, no deciding write can be confirmed. */
const REPLICATED_REDIS_FAULTS: readonly string[] = ['primary-kill', 'primary-freeze', 'replica-restart', ...AIMED_KILLS];

/**
 * When a fault kept `holder` from Redis (or froze it), plus RenewDeadline to recover; after a fault of a
 * replicated Redis also a lease duration, for a lease record written before the promotion is taken over
 * only once unchanged that long (replication epochs), and the restarted replica's resync.
 */
function excusedIntervals(input: AuditInput, holder: string): Array<[number, number]> {
  const recover = input.timings.renewDeadlineMs;
  const intervals: Array<[number, number]> = [];
  for (const fault of input.faults) {
    if (REPLICATED_REDIS_FAULTS.includes(fault.kind)) {
      intervals.push([fault.startedAt, fault.endedAt + recover + input.timings.leaseDurationMs]);
      continue;
    }
    const everyone = fault.kind === 'redis-restart' || fault.kind === 'redis-restart-kill-leader' || (fault.kind === 'freeze-in-renewal' && fault.detail.startsWith('CLIENT PAUSE'));
    const own = fault.target === holder && ['stop', 'partition-redis', 'partition-leader-redis-only', 'freeze-in-renewal', 'freeze-near-deadline'].includes(fault.kind);
    if (everyone || own) intervals.push([fault.startedAt, fault.endedAt + recover]);
  }
  return intervals;
}

/** How much of [from, to] the intervals cover (they may overlap each other). */
function overlap(from: number, to: number, intervals: Array<[number, number]>): number {
  const clipped = intervals.map(([a, b]) => [Math.max(a, from), Math.min(b, to)] as const).filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  let covered = 0;
  let end = from;
  for (const [a, b] of clipped) {
    if (b <= end) continue;
    covered += b - Math.max(a, end);
    end = b;
  }
  return covered;
}

function termSummaries(raises: Raise[], jobs: Map<string, SeenJob>): TermSummary[] {
  const terms = new Map<string, TermSummary>();
  raises.forEach((raise, index) => terms.set(raise.token, { rank: index, identity: raise.identity, token: raise.token, raisedAt: raise.at, enqueues: 0 }));
  for (const job of jobs.values()) {
    const term = terms.get(job.token);
    if (!term) continue;
    term.enqueues++;
    term.firstWrite = Math.min(term.firstWrite ?? Infinity, job.writtenAt);
    term.lastWrite = Math.max(term.lastWrite ?? -Infinity, job.writtenAt);
  }
  return [...terms.values()].sort((a, b) => a.rank - b.rank);
}

/**
 * Attributes each new term to the latest fault injected before it (if the term began within
 * {@link FAILOVER_ATTRIBUTION_MS} of that fault's end), and measures from the fault to the first enqueue
 * written under that term or a later one.
 */
function failoverGaps(faults: ExecutedFault[], raises: Raise[], jobs: Map<string, SeenJob>, rank: Map<string, number>): FailoverGap[] {
  const gaps: FailoverGap[] = [];
  const attributed = new Set<number>();
  for (const [index, raise] of raises.entries()) {
    if (index === 0) continue;
    const fault = faults.filter((f) => f.startedAt < raise.at).at(-1);
    if (!fault || attributed.has(fault.index) || raise.at > fault.endedAt + FAILOVER_ATTRIBUTION_MS) continue;
    attributed.add(fault.index);
    let first = Infinity;
    for (const job of jobs.values()) {
      if ((rank.get(job.token) ?? -1) >= index && job.writtenAt > fault.startedAt) first = Math.min(first, job.writtenAt);
    }
    if (first < Infinity) gaps.push({ fault: fault.index, kind: fault.kind, wasLeader: fault.wasLeader, gapMs: first - fault.startedAt });
  }
  return gaps;
}

function lastIndexAtOrBefore(raises: Raise[], at: number): number {
  let index = -1;
  for (let i = 0; i < raises.length && raises[i]!.at <= at; i++) index = i;
  return index;
}

function longestSilence(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let longest = 0;
  for (let i = 1; i < sorted.length; i++) longest = Math.max(longest, sorted[i]! - sorted[i - 1]!);
  return longest;
}

