import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { DEFAULT_STAGE_AHEAD_MS } from '../../src/producing/staging.js';
import { loadJobs } from '../../src/scheduling/loader.js';
import { audit, type Audit, type InvariantResult } from './audit.js';
import { ChaosCluster } from './cluster.js';
import { EventTail } from './events.js';
import { inject, type ExecutedFault } from './faults.js';
import { distinctRuns, RUN_ENDS_KEY, RUNS_KEY, type RunEndRecord, type RunRecord } from './jobs/_record.js';
import { describeFault, estimatedMs, planFaults, type ElectionTimings, type LockKind } from './plan.js';
import { spread, toMarkdown, type ChaosReport, type Spread } from './report.js';
import type { LeaseRecordWrite } from './lease-history.js';
import { DEFAULT_SCHEDULES, SchedulesClient } from './schedules-client.js';
import type { RedisKind } from './topology.js';

export const JOBS_DIR = fileURLToPath(new URL('./jobs/', import.meta.url));
const RESULTS_DIR = fileURLToPath(new URL('../../test-results/chaos/', import.meta.url));

/** Short election timings, so a crash fails over in about 2.5 s and a run sees many terms. */
export const CHAOS_TIMINGS: ElectionTimings = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 250 };

export interface ChaosOptions {
  lock: LockKind;
  /** The Redis leasebeat runs on: one server (default), a Sentinel group or a Redis Cluster. */
  redis?: RedisKind;
  instances: number;
  /** How long faults are injected. */
  durationMs: number;
  seed: number;
  timings?: ElectionTimings;
  /** Bound on waiting, after the faults, for every tick of the window to be settled and run. */
  drainTimeoutMs?: number;
  /** Where the reports go; default `test-results/chaos/<lock>-seed<seed>-<time>/`. */
  outDir?: string;
  /** Progress lines (the schedule, each fault as injected). */
  log?: (line: string) => void;
  /** Restrict the fault kinds (`only`), or put some first (`lead`): see planFaults. */
  faults?: { only?: string[]; lead?: string[] };
  /**
   * How many runtime schedules a client keeps upserting, editing and removing during the faults (see
   * schedules-client.ts); default {@link DEFAULT_SCHEDULES}, 0 for none.
   */
  schedules?: number;
}

export interface ChaosResult {
  report: ChaosReport;
  outDir: string;
}

/**
 * BullMQ recovers a run whose worker died once its 30 s lock has expired and two 15 s stalled checks
 * have seen it: up to a minute, plus the run itself.
 */
const DEFAULT_DRAIN_TIMEOUT_MS = 90_000;
/** How soon after start the per-minute job's first tick is due: early, so that a short run sees it twice. */
const FIRST_MINUTE_TICK_IN_MS = 12_000;

/**
 * Runs the chaos suite: K real `leasebeat start` processes on a Redis with AOF (and, for Kubernetes, the
 * fake Lease API), faults injected on a seeded schedule for `durationMs`, a drain, then the invariant
 * checks from Redis and the processes' logs. Writes `report.json`, `report.md` and the processes' logs.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const timings = options.timings ?? CHAOS_TIMINGS;
  const log = options.log ?? ((): void => undefined);
  const startedAt = new Date();
  const redisKind = options.redis ?? 'single';
  const outDir = options.outDir ?? join(RESULTS_DIR, `${options.lock}-${redisKind === 'single' ? '' : `${redisKind}-`}seed${options.seed}-${startedAt.toISOString().replaceAll(':', '-')}`);
  const schedules = options.schedules ?? DEFAULT_SCHEDULES;
  const faultArgs = (options.faults?.only ? ` --faults ${options.faults.only.join(',')}` : '') + (options.faults?.lead ? ` --lead ${options.faults.lead.join(',')}` : '') +
    (schedules === DEFAULT_SCHEDULES ? '' : ` --schedules ${schedules}`);
  const command = `npm run chaos -- --minutes ${+(options.durationMs / 60_000).toFixed(3)} --instances ${options.instances} --lock ${options.lock}${redisKind === 'single' ? '' : ` --redis ${redisKind}`} --seed ${options.seed}${faultArgs}`;
  const plan = planFaults({ seed: options.seed, durationMs: options.durationMs, lock: options.lock, redis: redisKind, timings, ...options.faults });
  log(`chaos: ${options.lock} lock on ${redisKind} Redis, ${options.instances} instances, ${(options.durationMs / 1000).toFixed(0)} s of faults, seed ${options.seed}`);
  log(`replay: ${command}`);
  for (const fault of plan) log(`  plan ${describeFault(fault)}`);

  // The per-minute job's second, shared by every process (and by this one, which reads the schedules).
  process.env.CHAOS_MINUTE_SECOND = String(new Date(Date.now() + FIRST_MINUTE_TICK_IN_MS).getUTCSeconds());
  const { jobs, errors } = await loadJobs(JOBS_DIR);
  if (errors.length > 0) throw new Error(`chaos fixtures do not load: ${errors.map((e) => e.message).join('; ')}`);
  const cluster = await ChaosCluster.start({
    lock: options.lock,
    redis: redisKind,
    instances: options.instances,
    jobsDir: JOBS_DIR,
    timings,
    // CHAOS_LOG_LEVEL=debug: the instances log their elector's every attempt (for reading a repro).
    env: { CHAOS_MINUTE_SECOND: process.env.CHAOS_MINUTE_SECOND, ...(process.env.CHAOS_LOG_LEVEL ? { LEASEBEAT_LOG_LEVEL: process.env.CHAOS_LOG_LEVEL } : {}) },
  });
  const queueNames = [...new Set([...jobs.values()].map((job) => job.queue))];
  const tail = new EventTail(() => cluster.newClient(), queueNames.map((name) => `${cluster.bullPrefix}:${name}:events`));
  const queues = new Map<string, Queue>();
  const faults: ExecutedFault[] = [];
  // Its own connection, by the URL users would give the admin API; started with the faults.
  const client = schedules > 0 ? new SchedulesClient({ connection: cluster.url, jobs, seed: options.seed, schedules }) : undefined;
  try {
    tail.start();
    cluster.startAll();
    const firstRaise = await waitFor('a first leader to produce', 60_000, () =>
      cluster.logs().find((entry) => entry.line.msg === 'fence raised; producing')?.line.time);
    log(`chaos: first term producing at ${new Date(firstRaise).toISOString()}`);
    // Ticks due while the first leader was still taking over belong to no term: the window starts after.
    const windowFrom = firstRaise + 1000;
    const faultsEnd = Date.now() + options.durationMs;
    client?.start();
    for (const fault of plan) {
      if (Date.now() + fault.gapMs + estimatedMs(fault) > faultsEnd) break;
      await sleep(fault.gapMs);
      const executed = await inject(cluster, fault);
      faults.push(executed);
      log(`  t+${((executed.startedAt - firstRaise) / 1000).toFixed(1)}s #${executed.index} ${executed.kind} ${executed.target ?? ''}${executed.wasLeader ? ' (leader)' : ''}: ${executed.detail}`);
    }
    await sleep(Math.max(0, faultsEnd - Date.now()));
    const windowTo = Date.now();
    await client?.stop();
    if (client) log(`chaos: the schedules client made ${client.writes.length} writes to ${schedules} schedules`);

    const drainStart = Date.now();
    // Made after the faults, on the suite's client as it is now (replaced if it ended meanwhile).
    for (const name of queueNames) {
      const queue = new Queue(name, { connection: cluster.client, prefix: cluster.bullPrefix });
      // Redis restarts are part of the run; the client reconnects by itself.
      queue.on('error', () => undefined);
      queues.set(name, queue);
    }
    const ledger = new TickLedger(cluster.client, new KeySpace());
    const input = {
      jobs: [...jobs.values()], window: { from: windowFrom, to: windowTo }, redis: cluster.client, ledger, queues, faults, steadyJob: 'every-second', timings,
      // The instances stage ahead by the default horizon (LEASEBEAT_STAGE_AHEAD is not set).
      ...(client ? { schedules: { writes: client.writes, ids: client.scheduleIds, stageAheadMs: DEFAULT_STAGE_AHEAD_MS, renewDeadlineMs: timings.renewDeadlineMs } } : {}),
    };
    log('chaos: faults over; draining');
    for (;;) {
      const draft = await audit({ ...input, ...(await observed(cluster)), logs: cluster.logs(), writes: tail.writes, runs: (await readRuns(cluster)).runs });
      if (draft.invariants.every((i) => !i.settles || i.ok) || Date.now() - drainStart > (options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS)) break;
      await sleep(2000);
    }
    const drainMs = Date.now() - drainStart;
    await cluster.stopAll();
    await tail.stop();
    await cluster.history.stop();
    if (cluster.replicated && 'dropLostWrites' in cluster.history) await cluster.history.dropLostWrites();
    const { runs, resent: resentRunRecords } = await readRuns(cluster);
    const result = await audit({ ...input, ...(await observed(cluster)), logs: cluster.logs(), writes: tail.writes, runs });
    const fence = await ledger.fence();
    // The schedules' ground truth as the audit judged it, for reading a violation: the client's writes, each
    // schedule's ledger (hash, skipped ranges, job state) and its runs.
    const schedulesEvidence = client ? await scheduleEvidence(cluster.client, ledger, client, runs) : undefined;
    result.invariants.push(processesBehaved(cluster));
    const report = buildReport({ options, redis: redisKind, redisFailovers: redisFailovers(faults, tail.writes), leaseWrites: cluster.history.snapshot().writes, timings, startedAt, command, plan, faults, result, window: input.window, drainMs, processes: cluster.incarnations.length, fence, resentRunRecords });
    await writeResults(outDir, report, cluster);
    if (schedulesEvidence) await writeFile(join(outDir, 'schedules.json'), JSON.stringify(schedulesEvidence, null, 2));
    return { report, outDir };
  } finally {
    await tail.stop().catch(() => undefined);
    await client?.stop().catch(() => undefined);
    await client?.close();
    for (const queue of queues.values()) await queue.close();
    tail.close();
    await cluster.close();
  }
}

/** The lock's history, the ends of runs, and when each process exited. */
async function observed(cluster: ChaosCluster): Promise<{ lease: ReturnType<ChaosCluster['history']['snapshot']>; runEnds: RunEndRecord[]; exits: Map<string, number> }> {
  const runEnds = (await cluster.recordsClient.lrange(RUN_ENDS_KEY, 0, -1)).map((text) => JSON.parse(text) as RunEndRecord);
  const exits = new Map(cluster.incarnations.flatMap((i) => (i.exitedAt === undefined ? [] : [[i.identity, i.exitedAt] as const])));
  return { lease: cluster.history.snapshot(), runEnds, exits };
}

/**
 * No process the suite started ended by itself: a crash silently shrinks the cluster the faults are
 * tested on (the supervisor restarts it, and this reports it).
 */
function processesBehaved(cluster: ChaosCluster): InvariantResult {
  const violations: string[] = [];
  for (const i of cluster.incarnations) {
    const stderr = i.instance.stderr.slice(-3).join(' | ');
    // `start` refuses to run while Redis does not answer (exit 2, one line): by design, and the
    // supervisor starts it again. Anything else that ends a process by itself is a crash.
    const refusedWithoutRedis = i.exitCode === 2 && /no Redis answers/.test(stderr);
    if (i.exitedAt === undefined || i.ended || refusedWithoutRedis) continue;
    violations.push(`${i.identity} (started ${new Date(i.startedAt).toISOString()}, ${i.instance.logs.length} log lines) exited by itself at ` +
      `${new Date(i.exitedAt).toISOString()} with ${i.exitCode}; stderr: ${stderr}`);
  }
  return {
    name: 'no process ends by itself (a refusal to start while Redis does not answer aside; those are restarted)',
    ok: violations.length === 0,
    checked: cluster.incarnations.length,
    violations: violations.slice(0, 25),
    violationCount: violations.length,
  };
}

/** Per schedule: the client's writes, its ledger as Redis holds it, and its runs. */
async function scheduleEvidence(redis: ChaosCluster['client'], ledger: TickLedger, client: SchedulesClient, runs: RunRecord[]): Promise<Record<string, unknown>> {
  const evidence: Record<string, unknown> = {};
  for (const id of client.scheduleIds) {
    evidence[id] = {
      writes: client.writes.filter((w) => w.id === id).map((w) => ({ ...w, sentAt: new Date(w.sentAt).toISOString(), answeredAt: new Date(w.answeredAt).toISOString() })),
      jobState: await redis.hgetall(ledger.keys.jobState(id)),
      ledger: Object.fromEntries(
        Object.entries(await redis.hgetall(ledger.keys.ledger(id)))
          .sort(([a], [b]) => Number(a) - Number(b))
          .map(([tick, state]) => [new Date(Number(tick)).toISOString(), state]),
      ),
      skipped: await ledger.skippedRanges(id),
      runs: runs.filter((run) => run.job === id).map((run) => ({ tick: new Date(run.tick).toISOString(), identity: run.identity, startedAt: new Date(run.startedAt).toISOString(), data: run.data })),
    };
  }
  return evidence;
}

async function readRuns(cluster: ChaosCluster): Promise<{ runs: RunRecord[]; resent: number }> {
  return distinctRuns((await cluster.recordsClient.lrange(RUNS_KEY, 0, -1)).map((text) => JSON.parse(text) as RunRecord));
}

async function waitFor<T>(what: string, timeoutMs: number, probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`chaos: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** For each fault that promoted a replica: its kind and the time from the fault to the first job added after the promotion. */
function redisFailovers(faults: ExecutedFault[], writes: EventTail['writes']): Array<{ kind: string; gapMs: number }> {
  const added = [...writes.values()].map((write) => write.addedAt).sort((a, b) => a - b);
  return faults.flatMap((fault) => {
    const promotedAt = fault.promotedAt;
    const first = promotedAt === undefined ? undefined : added.find((at) => at > promotedAt);
    return first === undefined ? [] : [{ kind: fault.kind, gapMs: first - fault.startedAt }];
  });
}

function buildReport(parts: {
  options: ChaosOptions;
  redis: RedisKind;
  redisFailovers: Array<{ kind: string; gapMs: number }>;
  leaseWrites: LeaseRecordWrite[];
  timings: ElectionTimings;
  startedAt: Date;
  command: string;
  plan: ChaosReport['plan'];
  faults: ExecutedFault[];
  result: Audit;
  window: { from: number; to: number };
  drainMs: number;
  processes: number;
  fence: { leaderTransitions: number; fenced: number; rejectedRaises: number };
  resentRunRecords: number;
}): ChaosReport {
  const { options, result, faults } = parts;
  const faultCounts: Record<string, number> = {};
  for (const fault of faults) faultCounts[fault.kind] = (faultCounts[fault.kind] ?? 0) + 1;
  const byKind: Record<string, Spread | undefined> = {};
  for (const kind of new Set(result.failovers.map((g) => g.kind))) {
    byKind[kind] = spread(result.failovers.filter((g) => g.kind === kind).map((g) => g.gapMs));
  }
  const redisByKind: Record<string, Spread | undefined> = {};
  for (const kind of new Set(parts.redisFailovers.map((g) => g.kind))) redisByKind[kind] = spread(parts.redisFailovers.filter((g) => g.kind === kind).map((g) => g.gapMs));
  return {
    lock: options.lock,
    redis: parts.redis,
    instances: options.instances,
    seed: options.seed,
    durationMs: options.durationMs,
    timings: parts.timings,
    startedAt: parts.startedAt.toISOString(),
    command: parts.command,
    window: {
      from: new Date(parts.window.from).toISOString(),
      to: new Date(parts.window.to).toISOString(),
      seconds: Math.round((parts.window.to - parts.window.from) / 1000),
    },
    drainMs: parts.drainMs,
    plan: parts.plan,
    faults,
    faultCounts,
    ok: result.invariants.every((i: InvariantResult) => i.ok),
    invariants: result.invariants,
    ticks: result.ticks,
    failover: { all: spread(result.failovers.map((g) => g.gapMs)), byKind, gaps: result.failovers },
    redisFailover: { all: spread(parts.redisFailovers.map((g) => g.gapMs)), byKind: redisByKind },
    enqueueLagMs: spread(result.lagMs),
    longestSilenceMs: result.longestSilenceMs,
    runsPerJob: result.runsPerJob,
    secondRuns: result.secondRuns,
    repeatedAdds: result.repeatedAdds,
    resentRunRecords: parts.resentRunRecords,
    writesWithoutEvent: result.writesWithoutEvent,
    terms: result.terms,
    lease: result.lease,
    leaseWrites: parts.leaseWrites,
    fence: { leaderTransitions: parts.fence.leaderTransitions, fenced: parts.fence.fenced, rejectedRaises: parts.fence.rejectedRaises },
    processes: parts.processes,
    ...(result.schedules ? { schedules: result.schedules } : {}),
  };
}

async function writeResults(outDir: string, report: ChaosReport, cluster: ChaosCluster): Promise<void> {
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, 'report.json'), JSON.stringify(report, null, 2));
  await writeFile(join(outDir, 'report.md'), toMarkdown(report));
  const lines = cluster.logs().map(({ identity, line }) => JSON.stringify({ identity, ...line }));
  await writeFile(join(outDir, 'instances.ndjson'), lines.join('\n') + '\n');
  const processes = cluster.incarnations.map((i) => ({
    identity: i.identity,
    startedAt: new Date(i.startedAt).toISOString(),
    exitedAt: i.exitedAt === undefined ? undefined : new Date(i.exitedAt).toISOString(),
    exitCode: i.exitCode,
    endedBySuite: i.ended ?? false,
    logLines: i.instance.logs.length,
    stderr: i.instance.stderr,
  }));
  await writeFile(join(outDir, 'processes.json'), JSON.stringify(processes, null, 2));
}
