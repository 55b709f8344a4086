/**
 * `npm run bench`: every comparison of the benchmark issues, on this machine, printed as one Markdown
 * table and written to docs/benchmarks.md (between its bench markers; the prose around them is kept).
 * `npm run bench -- --only failover,candidates` measures some sections again; the others are rendered from
 * their last stored results (bench/results/, committed with the table they render, so that a run of one
 * section on a fresh clone keeps the others), each with the time it was measured. Progress goes to stderr.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { fileURLToPath } from 'node:url';
import { spread, type Spread } from '../scripts/chaos/report.js';
import type { ElectionTimings } from '../scripts/chaos/plan.js';
import { startRedis, type TestRedis } from '../test/support/redis-server.js';
import { measureCandidates, type CandidatesResult } from './candidates.js';
import { measureCoordination, type CoordinationResult } from './coordination.js';
import { measureFailover, type FailoverResult } from './failover.js';
import { allRan, describeFates } from './tick-fates.js';
import { measureLeaderCost } from './leader-cost.js';
import type { LeaderCost } from './leader-process.js';
import { machineFacts, type MachineFacts } from './machine.js';
import { bullmqPrecision, leasebeatPrecision, naivePrecision, PRECISION_PATTERN, type PrecisionResult } from './precision.js';
import { measureThroughput, type ThroughputResult } from './throughput.js';
import { measureDurability, type DurabilityResult } from './durability.js';
import { measureInstanceCost, type InstanceCost } from './instance.js';
import { measureRuntimeSchedules, type RuntimeSchedulesResult } from './runtime-schedules.js';
import { measureMillionSchedules, MILLION, MILLION_WINDOW_S, millionScale, SETTLE_MS, type MillionSchedulesResult } from './million-schedules.js';
import { takeoverLagRow } from './takeover-lag.js';
import { BACKFILL_RATE, BACKFILL_TICKS, measureBackfill, type BackfillResult } from './backfill.js';
import { INSTANCE_ROUNDS, measureInstancePrecision, runtimeSize, type InstancePrecisionResult } from './instance-precision.js';
import { BYTES_IN_FLIGHT, measureRedisBytes, type RedisBytesResult } from './redis-bytes.js';
import { benchArgs, type BenchOptions } from './options.js';
import { currentTree, openBaseline } from './trees.js';
import { addBaselineCell, BASELINE_HEADER, instancePrecisionRows, medianRatio, redisBytesRows } from './versus-rows.js';

const DOC = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const START = '<!-- bench:start -->';
const END = '<!-- bench:end -->';

/** Short election timings for the failover trials, so 80 trials fit in a few minutes. */
const FAILOVER_TIMINGS: ElectionTimings = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 250 };
/** The defaults users run with (15 s / 10 s / 2 s), for the coordination load. */
const DEFAULT_TIMINGS: ElectionTimings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 };
const FAILOVER_TRIALS = 20;
/** How many electors contend for a released lease in the candidates section. */
const CANDIDATES = 20;
const PRECISION_SIZES = [1000, 10_000];
/** Issue 21's row: this many runtime schedules firing together, against BullMQ's burst of the same size. */
const RUNTIME_PRECISION_SCHEDULES = 10_000;
/** Each precision row is measured this many times (alternating the systems); the median ratio counts. */
const PRECISION_RUNS = 3;
/** The per-second row: this many once-a-second schedules spread over the second. */
const PER_SECOND_SCHEDULES = 100;
const LEADER_SCHEDULES = [0, 10_000, 100_000];
const LEADER_WINDOW_MS = 20_000;
const COORDINATION_WARMUP_MS = 10_000;
const COORDINATION_WINDOW_MS = 45_000;
const INSTANCE_SCHEDULES = 10_000;
/** The issue's row: a whole instance's RSS over 10 minutes after two bursts. */
const INSTANCE_WINDOW_MS = 600_000;
/** Issue 21's upsert row: distinct schedule ids written, this many at once. */
const SCHEDULE_UPSERTS = 100_000;
const SCHEDULE_UPSERTS_IN_FLIGHT = 32;
/** Issue 21's million rows: the setup writes through the same `schedules.upsert`, this many at once. */
const MILLION_UPSERTS_IN_FLIGHT = 64;

const progress = (line: string): void => void process.stderr.write(`${line}\n`);

/** Each section's last results are kept here, so that one section can be measured again on its own. */
const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

/** What each section measured, as stored; a section missing from a run is rendered from its last results. */
interface Results {
  failover: FailoverResult[];
  candidates: CandidatesResult[];
  precision: PrecisionResult[];
  throughput: ThroughputResult;
  leader: LeaderCost[];
  coordination: CoordinationResult[];
  instance: InstanceCost;
  durability: DurabilityResult;
  schedules: RuntimeSchedulesResult;
  backfill: BackfillResult;
  'instance-precision': InstancePrecisionResult;
  'redis-bytes': RedisBytesResult;
}
type Section = keyof Results;
const SECTIONS: Section[] = [
  'failover', 'candidates', 'precision', 'throughput', 'leader', 'coordination', 'instance', 'durability', 'schedules', 'backfill', 'instance-precision', 'redis-bytes',
];

interface Stored<T> {
  measuredAt: string;
  machine: MachineFacts;
  seconds: number;
  data: T;
}

/** Measures one section. Sections that need a plain Redis share one, started here. */
async function measure<S extends Section>(section: S, redisUrl: () => Promise<{ redis: Redis; url: string }>, options: BenchOptions): Promise<Results[S]> {
  switch (section) {
    case 'failover': {
      progress(`failover: ${FAILOVER_TRIALS} trials per kind and lock`);
      const results = [];
      for (const lock of ['redis', 'kubernetes'] as const) results.push(...(await measureFailover(lock, FAILOVER_TRIALS, FAILOVER_TIMINGS, progress)));
      return results as Results[S];
    }
    case 'candidates': {
      progress(`candidates: ${CANDIDATES} electors per lock, ${FAILOVER_TRIALS} releases`);
      const results = [];
      for (const lock of ['redis', 'kubernetes'] as const) results.push(await measureCandidates(lock, CANDIDATES, FAILOVER_TRIALS, FAILOVER_TIMINGS, progress));
      return results as Results[S];
    }
    case 'precision': {
      progress('tick precision: leasebeat vs BullMQ Job Schedulers');
      const { redis, url } = await redisUrl();
      const precision: PrecisionResult[] = [];
      const runs: Array<() => Promise<PrecisionResult>> = [
        ...PRECISION_SIZES.flatMap((size) => [() => leasebeatPrecision(redis, url, size), () => bullmqPrecision(redis, url, size)]),
        () => leasebeatPrecision(redis, url, RUNTIME_PRECISION_SCHEDULES, 'runtime'),
        () => leasebeatPrecision(redis, url, PER_SECOND_SCHEDULES, 'per-second'),
        () => naivePrecision(redis, url, PER_SECOND_SCHEDULES),
      ];
      for (let round = 0; round < PRECISION_RUNS; round++) {
        for (const run of runs) {
          const result = await run();
          progress(`  ${round + 1}/${PRECISION_RUNS} ${result.system} ${result.scenario} ${result.schedules}: enqueue lag ${show(result.enqueueLagMs)}, start lag ${show(result.startLagMs)}, ${result.delivered}/${result.expected} runs`);
          precision.push(result);
        }
      }
      return precision as Results[S];
    }
    case 'throughput': {
      progress('enqueue throughput');
      const { redis } = await redisUrl();
      await redis.flushall();
      const throughput = await measureThroughput(redis);
      progress(`  ${JSON.stringify(throughput)}`);
      return throughput as Results[S];
    }
    case 'leader': {
      progress(`leader cost at ${LEADER_SCHEDULES.join(', ')} schedules`);
      const { redis, url } = await redisUrl();
      const costs: LeaderCost[] = [];
      for (const count of LEADER_SCHEDULES) {
        costs.push(await measureLeaderCost(redis, url, count, count === 0 ? LEADER_WINDOW_MS / 2 : LEADER_WINDOW_MS));
        progress(`  ${JSON.stringify(costs.at(-1))}`);
      }
      return costs as Results[S];
    }
    case 'coordination': {
      progress(`coordination load: 3 idle instances per lock, default timings, ${COORDINATION_WINDOW_MS / 1000} s`);
      const results = await Promise.all(
        (['redis', 'kubernetes'] as const).map((lock) => measureCoordination(lock, 3, DEFAULT_TIMINGS, COORDINATION_WARMUP_MS, COORDINATION_WINDOW_MS)),
      );
      return results as Results[S];
    }
    case 'instance': {
      progress(`whole instance at ${int(INSTANCE_SCHEDULES)} schedules: start-up, then RSS over ${INSTANCE_WINDOW_MS / 60_000} min after 2 bursts`);
      const { redis, url } = await redisUrl();
      return (await measureInstanceCost(redis, url, { schedules: INSTANCE_SCHEDULES, windowMs: INSTANCE_WINDOW_MS })) as Results[S];
    }
    case 'durability':
      progress('durability: the fenced path on a Sentinel group, durability off / WAIT 1 / WAIT 2');
      return (await measureDurability(progress)) as Results[S];
    case 'schedules': {
      progress(`runtime schedules: ${int(SCHEDULE_UPSERTS)} upserts (${SCHEDULE_UPSERTS_IN_FLIGHT} in flight) vs BullMQ, then a leader over them`);
      const scale = millionScale();
      const { redis, url } = await redisUrl();
      const result = await measureRuntimeSchedules(redis, url, SCHEDULE_UPSERTS, SCHEDULE_UPSERTS_IN_FLIGHT, progress);
      progress(`runtime schedules at a million: ${int(scale.schedules)} hourly schedules spread over the hour, a leader over them for ${scale.windowS} s`);
      const million = await measureMillionSchedules(redis, url, { ...scale, inFlight: MILLION_UPSERTS_IN_FLIGHT }, progress);
      return { ...result, million } as Results[S];
    }
    case 'backfill': {
      progress(`backfill: ${int(BACKFILL_TICKS)} past ticks at ${int(BACKFILL_RATE)}/s beside live per-second jobs`);
      const { redis, url } = await redisUrl();
      const result = await measureBackfill(redis, url, progress);
      progress(`  ${JSON.stringify(result)}`);
      return result as Results[S];
    }
    case 'instance-precision': {
      const { trees, instanceSizes } = options;
      progress(
        `whole instance precision: \`leasebeat start\` ${trees.current.label}${trees.baseline ? `, ${trees.baseline.label}` : ''} and BullMQ at ${instanceSizes.map(int).join(', ')} ` +
          `file schedules and ${int(runtimeSize(instanceSizes))} runtime ones, ${INSTANCE_ROUNDS} rounds`,
      );
      return (await measureInstancePrecision(trees, instanceSizes, INSTANCE_ROUNDS, progress)) as Results[S];
    }
    case 'redis-bytes':
      progress(`Redis bytes: ${int(options.bytesSchedules)} schedules per system and kind, ${BYTES_IN_FLIGHT} in flight`);
      return (await measureRedisBytes(options.trees, options.bytesSchedules, progress)) as Results[S];
  }
  throw new Error(`unknown section ${String(section)}`);
}

/** Runs the sections asked for (`--only a,b`; default all), storing each one's results as it finishes. */
async function run(sections: Section[], options: BenchOptions): Promise<void> {
  const machine = machineFacts();
  progress(`bench: ${machine.cpu}, ${machine.cores} cores, node ${machine.node}, redis ${machine.redis}; sections ${sections.join(', ')}`);
  let shared: { server: TestRedis; redis: Redis } | undefined;
  const redisUrl = async (): Promise<{ redis: Redis; url: string }> => {
    if (!shared) {
      const server = await startRedis();
      shared = { server, redis: server.client() };
    }
    return { redis: shared.redis, url: shared.server.url };
  };
  try {
    for (const section of sections) {
      const started = Date.now();
      const data = await measure(section, redisUrl, options);
      const stored: Stored<unknown> = { measuredAt: new Date().toISOString(), machine, seconds: Math.round((Date.now() - started) / 1000), data };
      mkdirSync(RESULTS_DIR, { recursive: true });
      writeFileSync(`${RESULTS_DIR}${section}.json`, JSON.stringify(stored, null, 2));
    }
  } finally {
    shared?.redis.disconnect();
    await shared?.server.close();
  }
}

function load<S extends Section>(section: S): Stored<Results[S]> | undefined {
  const file = `${RESULTS_DIR}${section}.json`;
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Stored<Results[S]>) : undefined;
}

function selected(argv: string[]): Section[] {
  const index = argv.indexOf('--only');
  if (index < 0) return SECTIONS;
  const names = (argv[index + 1] ?? '').split(',').filter(Boolean);
  const unknown = names.filter((name) => !SECTIONS.includes(name as Section));
  if (unknown.length > 0 || names.length === 0) {
    process.stderr.write(`bench: --only takes a comma-separated list of ${SECTIONS.join(', ')}; got ${JSON.stringify(argv[index + 1] ?? '')}\n`);
    process.exit(2);
  }
  return names as Section[];
}

const show = (s: Spread | undefined): string => (s ? `${s.median} / ${s.p99} / ${s.max} ms` : 'n/a');
const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;
const met = (ok: boolean): string => (ok ? 'yes' : '**no**');

function failoverRows(results: FailoverResult[]): string[] {
  const { leaseDurationMs: lease, retryPeriodMs: retry } = FAILOVER_TIMINGS;
  const label: Record<FailoverResult['kind'], string> = {
    crash: 'crash (SIGKILL of the leader)',
    release: 'release (SIGTERM of the leader)',
    stop: 'silent leader (SIGSTOP, resumed after the takeover)',
  };
  return results.map(({ lock, kind, samplesMs, staleEnqueues, dueTicks }) => {
    const measured = samplesMs.filter((ms) => !Number.isNaN(ms));
    const s = spread(measured);
    const p99 = s?.p99 ?? Infinity;
    const fence = `${staleEnqueues} stale enqueues`;
    const cells = s ? `${s.min} / ${s.median} / ${s.p99} ms (min / median / p99); ${fence}` : `n/a; ${fence}`;
    const head = `| 1 | Failover, ${lock} lock, ${label[kind]}: fault → first enqueue by the new leader, ${samplesMs.length} trials | ${cells}`;
    if (kind === 'release') {
      const goal = lock === 'redis' ? 100 : 150;
      // Issue 31: a handover skips no tick. Results measured before the check have no tally, and meet no goal.
      const ticks = dueTicks ? describeFates(dueTicks) : 'due ticks not checked';
      const everyTickRan = dueTicks !== undefined && allRan(dueTicks);
      return `${head}; ${ticks} | client-go polling: up to 2.2 × RetryPeriod = ${2.2 * retry} ms | | p99 ≤ ${goal} ms; no stale enqueue; ` +
        `every tick due around the handover ran (0 skipped catchup-limit, 0 unrun) | ${met(measured.length === samplesMs.length && p99 <= goal && staleEnqueues === 0 && everyTickRan)} |`;
    }
    const bound = lease + 1.2 * retry;
    const within = measured.filter((ms) => ms <= bound).length;
    return `${head} | bound ${bound} ms (LeaseDuration + 1.2 × RetryPeriod) | ${within}/${samplesMs.length} within | ` +
      `all within the bound; p99 ≤ LeaseDuration + 300 ms = ${lease + 300} ms; no stale enqueue | ${met(within === samplesMs.length && p99 <= lease + 300 && staleEnqueues === 0)} |`;
  });
}

function candidatesRows(results: CandidatesResult[]): string[] {
  return results.map(({ lock, candidates, takeoverMs, winners, maxWritesPerCandidate, writesPerTrial }) => {
    const s = spread(takeoverMs.filter((ms) => !Number.isNaN(ms)));
    const oneWinner = winners.every((n) => n === 1);
    const writes = spread(writesPerTrial);
    return `| 1 | ${candidates} candidates, ${lock} lock: release → next leader, ${takeoverMs.length} trials | ` +
      `${s ? `${s.min} / ${s.median} / ${s.p99} ms` : 'n/a'}; one winner in ${winners.filter((n) => n === 1).length}/${winners.length}; ` +
      `writes per trial (all candidates) median ${writes?.median ?? 'n/a'}, most by one candidate ${maxWritesPerCandidate} | | | ` +
      `one winner; p99 ≤ 150 ms; ≤ 2 writes per candidate | ${met(oneWinner && (s?.p99 ?? Infinity) <= 150 && maxWritesPerCandidate <= 2)} |`;
  });
}

/** The runs of one precision row, paired in the order measured: leasebeat's i-th with the baseline's i-th. */
function pairs(
  results: PrecisionResult[],
  scenario: PrecisionResult['scenario'],
  size: number,
  baseline: PrecisionResult['system'],
  baselineScenario = scenario,
): Array<[PrecisionResult, PrecisionResult]> {
  const of = (system: PrecisionResult['system'], wanted: PrecisionResult['scenario']): PrecisionResult[] =>
    results.filter((r) => r.system === system && (r.scenario ?? 'burst') === wanted && r.schedules === size);
  const theirs = of(baseline, baselineScenario);
  return of('leasebeat', scenario).flatMap((ours, i) => (theirs[i] ? [[ours, theirs[i]] as [PrecisionResult, PrecisionResult]] : []));
}

/** The median of the runs' p99 ratios, their spread, and the run with the median ratio (whose figures are shown). */
function medianRun(
  runs: Array<[PrecisionResult, PrecisionResult]>,
  pick: (r: PrecisionResult) => Spread | undefined,
): { ratio: number; spread: string; run: [PrecisionResult, PrecisionResult] } | undefined {
  const median = medianRatio(runs, ([ours, theirs]) => (pick(ours)?.p99 ?? Infinity) / (pick(theirs)?.p99 ?? NaN));
  return median && { ratio: median.ratio, spread: median.spread, run: median.pair };
}

function precisionRows(results: PrecisionResult[]): string[] {
  const rows: string[] = [];
  for (const size of PRECISION_SIZES) {
    const runs = pairs(results, 'burst', size, 'bullmq');
    const enqueue = medianRun(runs, (r) => r.enqueueLagMs);
    const start = medianRun(runs, (r) => r.startLagMs);
    if (!enqueue || !start) continue;
    const [ours, theirs] = enqueue.run;
    const [oursStart, theirsStart] = start.run;
    rows.push(
      `| 2 | Enqueue lag, ${int(size)} schedules firing together: run available to workers − nominal tick (median / p99 / max; the run with the median ratio) | ${show(ours.enqueueLagMs)} | ` +
        `BullMQ Job Schedulers: ${show(theirs.enqueueLagMs)} | p99 ${enqueue.ratio.toFixed(2)}× (median; ${enqueue.spread}) | ≤ 1.0× BullMQ's | ${met(enqueue.ratio <= 1)} |`,
      `| 2 | Handler-start lag, ${int(size)} schedules: worker takes the run − nominal tick (median / p99 / max); runs that came to exist | ` +
        `${show(oursStart.startLagMs)}; ${oursStart.delivered}/${oursStart.expected} | BullMQ: ${show(theirsStart.startLagMs)}; ${theirsStart.delivered}/${theirsStart.expected} | ` +
        `p99 ${start.ratio.toFixed(2)}× (median; ${start.spread}) | ≤ 0.7× BullMQ's | ${met(start.ratio <= 0.7)} |`,
    );
  }
  const runtime = medianRun(pairs(results, 'runtime', RUNTIME_PRECISION_SCHEDULES, 'bullmq', 'burst'), (r) => r.startLagMs);
  if (runtime) {
    const [ours, theirs] = runtime.run;
    rows.push(
      `| 8 | Handler-start lag, ${int(RUNTIME_PRECISION_SCHEDULES)} runtime schedules of one job type firing together (median / p99 / max); runs that came to exist | ` +
        `${show(ours.startLagMs)}; ${ours.delivered}/${ours.expected} | BullMQ: ${show(theirs.startLagMs)}; ${theirs.delivered}/${theirs.expected} | ` +
        `p99 ${runtime.ratio.toFixed(2)}× (median; ${runtime.spread}) | ≤ 0.7× BullMQ's | ${met(runtime.ratio <= 0.7)} |`,
    );
  }
  const perSecond = pairs(results, 'per-second', PER_SECOND_SCHEDULES, 'naive');
  const lag = medianRun(perSecond, (r) => r.enqueueLagMs);
  if (lag) {
    const [ours, theirs] = lag.run;
    const p99s = perSecond.map(([r]) => r.enqueueLagMs?.p99 ?? Infinity).sort((a, b) => a - b);
    const p99 = p99s[Math.floor((p99s.length - 1) / 2)]!;
    rows.push(
      `| 2 | Enqueue lag, ${PER_SECOND_SCHEDULES} schedules each once a second, spread over the second (median / p99 / max; the run with the median ratio); runs | ` +
        `${show(ours.enqueueLagMs)}; ${ours.delivered}/${ours.expected}; p99 of each run ${p99s.join(' / ')} ms | naive \`setTimeout\` + \`Queue.add\`: ${show(theirs.enqueueLagMs)}; ${theirs.delivered}/${theirs.expected} | ` +
        `p99 ${lag.ratio.toFixed(2)}× (median; ${lag.spread}) | p99 ≤ 20 ms (median of the runs) | ${met(p99 <= 20)} |`,
    );
  }
  return rows;
}

function throughputRows(t: ThroughputResult): string[] {
  if (t.fencedBurst === undefined) return ['| | throughput: stored results predate the batched path (`npm run bench -- --only throughput`) | | | | | |'];
  return [
    `| 3 | Fenced exactly-once enqueue, a burst of ${int(t.burst)} ticks due together (the Producer's \`FencedEnqueue\`: batched claims and confirms, \`addBulk\` per queue) | ` +
      `${int(t.fencedBurst)} jobs/s | \`addBulk\` (${t.bulkSize} per call): ${int(t.addBulk)} jobs/s | ${ratio(t.fencedBurst, t.addBulk)} | ≥ 0.9× \`addBulk\` | ${met(t.fencedBurst / t.addBulk >= 0.9)} |`,
    `| 3 | The same burst vs raw \`Queue.add\`, ${t.inFlight} in flight | fenced: ${int(t.fencedBurst)} jobs/s | raw \`Queue.add\`: ${int(t.rawInFlight)} jobs/s | ` +
      `${ratio(t.fencedBurst, t.rawInFlight)} | (context) | |`,
    `| 3 | Enqueue throughput, one tick at a time (1 in flight: claim, add, confirm in series) | fenced: ${int(t.fencedSequential)} jobs/s | raw \`Queue.add\`: ${int(t.rawSequential)} jobs/s | ` +
      `${ratio(t.fencedSequential, t.rawSequential)} | (context: three round trips against one) | |`,
  ];
}

function leaderRows(costs: LeaderCost[]): string[] {
  const idle = costs.find((c) => c.schedules === 0);
  const base = idle ? `0 schedules: ${idle.cpuMsPerSecond.toFixed(1)} ms CPU/s, RSS ${idle.rssMiB.toFixed(0)} MiB, heap ${idle.heapUsedMiB.toFixed(0)} MiB` : '';
  return costs
    .filter((c) => c.schedules > 0)
    .map((c) => {
      const seconds = c.windowMs / 1000;
      const expected = (c.schedules / 60) * seconds;
      const lag = c.enqueueLagMs ? `enqueue lag ${c.enqueueLagMs.median} / ${c.enqueueLagMs.p99} / ${c.enqueueLagMs.max} ms (median / p99 / max)` : 'enqueue lag n/a';
      const extraRss = idle ? c.rssMiB - idle.rssMiB : NaN;
      const goals: Array<[string, boolean]> =
        c.schedules >= 100_000
          ? [
              ['takeover ≤ 5 s', c.takeoverMs <= 5000],
              ['enqueue lag p99 ≤ 100 ms', (c.enqueueLagMs?.p99 ?? Infinity) <= 100],
              ['sustained (≥ 95% of due ticks enqueued in the window)', c.enqueued >= 0.95 * expected],
            ]
          : [
              ['takeover ≤ 1 s', c.takeoverMs <= 1000],
              ['RSS ≤ +20 MiB over 0 schedules', extraRss <= 20],
            ];
      return (
        `| 4 | Leader, ${int(c.schedules)} schedules (each once a minute, spread over the seconds: ${int(c.schedules / 60)} ticks/s), over ${seconds} s | ` +
        `takeover ${(c.takeoverMs / 1000).toFixed(2)} s; ${c.cpuMsPerSecond.toFixed(1)} ms CPU/s (${(c.cpuMsPerSecond / 10).toFixed(1)}% of a core); RSS ${c.rssMiB.toFixed(0)} MiB ` +
        `(${extraRss >= 0 ? '+' : ''}${extraRss.toFixed(0)} MiB), heap ${c.heapUsedMiB.toFixed(0)} MiB; ${int(c.enqueued)} enqueues of ~${int(expected)} due; ${lag} | ${base} | | ` +
        `${goals.map(([goal]) => goal).join('; ')} | ${met(goals.every(([, ok]) => ok))} |`
      );
    });
}

function coordinationRows(results: CoordinationResult[]): string[] {
  return results.map(({ lock, instances, feedConnections }) => {
    const leader = instances.find((i) => i.role === 'leader')!;
    const followers = instances.filter((i) => i.role === 'follower');
    const average = (pick: (i: (typeof instances)[number]) => number): number => followers.reduce((sum, i) => sum + pick(i), 0) / followers.length;
    const api = lock === 'kubernetes' ? `Lease API ${int(leader.apiRequestsPerMinute)} req/min, ` : '';
    const apiFollower = lock === 'kubernetes' ? `Lease API ${int(average((i) => i.apiRequestsPerMinute))} req/min, ` : '';
    return `| 5 | Coordination load, ${lock} lock, 3 idle instances, default timings (15 s / 10 s / 2 s), per instance | ` +
      `leader: ${api}Redis ${int(leader.redisCommandsPerMinute)} cmd/min | follower (mean of ${followers.length}): ${apiFollower}Redis ${int(average((i) => i.redisCommandsPerMinute))} cmd/min; ` +
      `${feedConnections ?? 'n/a'} ${lock === 'kubernetes' ? 'Lease watches' : 'pub/sub subscribers'} held by the ${instances.length} instances | | (context) | |`;
  });
}

function instanceRows(c: InstanceCost): string[] {
  return [
    `| 6 | Whole instance (leader with its workers), ${int(c.schedules)} schedules firing every minute: start-up until it leads; RSS over ${c.windowMs / 60_000} min after ${c.bursts} bursts ` +
      `(first / last / min / max, slope) | start-up ${(c.startupMs / 1000).toFixed(1)} s; RSS ${c.rssMiB.first.toFixed(0)} / ${c.rssMiB.last.toFixed(0)} / ${c.rssMiB.min.toFixed(0)} / ` +
      `${c.rssMiB.max.toFixed(0)} MiB, ${c.rssSlopeMiBPerMinute.toFixed(1)} MiB/min; ${int(c.runsInWindow)} runs in the window | | | start-up ≤ 5 s; RSS ≤ 250 MiB, flat | ` +
      `${met(c.startupMs <= 5000 && c.rssMiB.max <= 250 && Math.abs(c.rssSlopeMiBPerMinute) < 2)} |`,
  ];
}

/** The cost of durable writes and runs, each setting against durability off, in the same run on the same Sentinel group. */
function durabilityRows(d: DurabilityResult): string[] {
  const off = d.settings.find((s) => s.minReplicas === 0);
  return d.settings
    .filter((s) => s.minReplicas > 0)
    .flatMap((s) => {
      const addedMs = off ? s.sequentialMs.p50 - off.sequentialMs.p50 : NaN;
      const burst = off ? s.burstPerSecond / off.burstPerSecond : NaN;
      const runAddedMs = off ? s.runMs.p50 - off.runMs.p50 : NaN;
      const runBurst = off ? s.runsPerSecond / off.runsPerSecond : NaN;
      return [
        `| 7 | Durability on a Sentinel group (1 primary, 2 replicas, 3 sentinels), ${s.label}: one tick (claim, add confirmed on its server, confirm; p50 / p99 over ${int(d.sequentialTicks)}); ` +
          `a burst of ${int(d.burst)} ticks | ${s.sequentialMs.p50} / ${s.sequentialMs.p99} ms; burst ${int(s.burstPerSecond)} ticks/s with ${s.burstWaits} WAITs | ` +
          `off: ${off?.sequentialMs.p50} / ${off?.sequentialMs.p99} ms; burst ${int(off?.burstPerSecond ?? NaN)} ticks/s | burst ${burst.toFixed(2)}×; +${addedMs.toFixed(2)} ms per tick (p50) | ` +
          `burst ≥ 0.7× off; ≤ +3 ms per tick on loopback | ${met(burst >= 0.7 && addedMs <= 3)} |`,
        `| 7 | Durability of runs, ${s.label}: one run (add → take confirmed → handler → finish recorded and confirmed → BullMQ's completion, checked on replicas; p50 / p99 over ${int(d.sequentialRuns)}); ` +
          `a burst of ${int(d.runBurst)} runs on one worker of concurrency 64 | ${s.runMs.p50} / ${s.runMs.p99} ms; burst ${int(s.runsPerSecond)} runs/s | ` +
          `off: ${off?.runMs.p50} / ${off?.runMs.p99} ms; burst ${int(off?.runsPerSecond ?? NaN)} runs/s | burst ${runBurst.toFixed(2)}×; +${runAddedMs.toFixed(2)} ms per run (p50) | ` +
          `burst ≥ 0.7× off; ≤ +3 ms per run on loopback | ${met(runBurst >= 0.7 && runAddedMs <= 3)} |`,
      ];
    });
}

/** Issue 22's row: a paced backfill ends on its rate's time, and the live ticks beside it stay on time. */
function backfillRows(b: BackfillResult): string[] {
  const boundMs = (b.ticks / b.rate) * 1000;
  const within = Math.abs(b.elapsedMs - boundMs) <= 0.1 * boundMs;
  const liveP99 = b.liveEnqueueLagMs?.p99 ?? Infinity;
  return [
    `| 9 | Backfill of ${int(b.ticks)} past ticks of a per-second job at \`--rate ${int(b.rate)}\` (\`admin.backfill\`, run by the leader's backfill desk) beside ${b.liveSchedules} live ` +
      `per-second jobs: request → done; the live runs due meanwhile, available to workers − nominal tick (median / p99 / max) | ${(b.elapsedMs / 1000).toFixed(1)} s, ` +
      `${int(b.enqueued)} enqueued (${b.state}); live ${show(b.liveEnqueueLagMs)}, ${int(b.liveDelivered)}/${int(b.liveExpected)} runs | its rate's time: ${(boundMs / 1000).toFixed(0)} s | ` +
      `${(b.elapsedMs / boundMs).toFixed(2)}× | within 10 % of ${(boundMs / 1000).toFixed(0)} s; live p99 ≤ 100 ms | ${met(within && liveP99 <= 100 && b.state === 'done')} |`,
  ];
}

function scheduleRows(r: RuntimeSchedulesResult): string[] {
  const { idle, loaded } = r;
  const perScheduleKiB = ((loaded.rssMiB - idle.rssMiB) * 1024) / loaded.schedules;
  const lag = loaded.applyLagMs;
  return [
    `| 8 | \`schedules.upsert\` throughput, ${int(r.upserts)} distinct ids (hourly), ${r.inFlight} in flight | ${int(r.leasebeatPerSecond)} upserts/s | ` +
      `BullMQ \`upsertJobScheduler\`: ${int(r.bullmqPerSecond)}/s | ${ratio(r.leasebeatPerSecond, r.bullmqPerSecond)} | ≥ 1.0× BullMQ's | ${met(r.leasebeatPerSecond >= r.bullmqPerSecond)} |`,
    // `every: '1h'` schedules all fire at hh:00, so between those instants a leader holds no lane for them:
    // these two rows are context for the write path's leader; the million rows below measure the spread case.
    `| 8 | Leader RSS with the ${int(loaded.schedules)} upserted schedules (\`every: '1h'\`, all due at hh:00, so no lane is held between) over 0 schedules | RSS ${loaded.rssMiB.toFixed(0)} MiB, heap ${loaded.heapUsedMiB.toFixed(0)} MiB: ` +
      `${perScheduleKiB.toFixed(1)} KiB per schedule | 0 schedules: RSS ${idle.rssMiB.toFixed(0)} MiB, heap ${idle.heapUsedMiB.toFixed(0)} MiB | | (context; the goal is measured at 1,000,000 below) | |`,
    `| 8 | Takeover with the ${int(loaded.schedules)} upserted schedules: process start → every schedule taken over | ${(loaded.takeoverMs / 1000).toFixed(1)} s | ` +
      `0 schedules: ${(idle.takeoverMs / 1000).toFixed(1)} s | | (context; the goal is measured at 1,000,000 below) | |`,
    `| 8 | Upsert → live on the leader (\`leasebeat_schedule_apply_lag_seconds\`), ${loaded.edits} edits among ${int(loaded.schedules)} schedules | ${show(lag)} | ` +
      `with 0 schedules: ${show(idle.applyLagMs)} | | p99 ≤ 100 ms | ${met(lag !== undefined && lag.p99 <= 100)} |`,
    ...(r.million
      ? millionRows(r.million)
      : [
          '| 8 | 1,000,000 schedules: RSS, takeover, enqueue lag over 10 min | not measured: ' +
            `a leader holds a lane and a compiled definition per schedule: at the rate above, ${((perScheduleKiB * 1_000_000) / 2 ** 20).toFixed(1)} GiB at 1,000,000 | | | the issue's bounds | **no** |`,
        ]),
  ];
}

/** Issue 21's million rows, each a measurement of the same run; a reduced run (env overrides) claims no goal. */
function millionRows(m: MillionSchedulesResult): string[] {
  const { idle, loaded } = m;
  const windowS = (m.windowEnd - m.windowStart) / 1000;
  const reduced = m.schedules < MILLION || windowS < MILLION_WINDOW_S;
  const scale = reduced ? ' (reduced run: LEASEBEAT_BENCH_MILLION_SCHEDULES / _WINDOW_S; the issue asks 1,000,000 over 600 s)' : '';
  const verdict = (ok: boolean): string => (reduced ? `n/a (reduced; ${ok ? 'yes' : 'no'} at this scale)` : met(ok));
  const kib = (extraMiB: number): number => (extraMiB * 1024) / m.schedules;
  const settledKiB = kib(loaded.settled.rssMiB - idle.settled.rssMiB);
  const endKiB = kib(loaded.end.rssMiB - idle.end.rssMiB);
  const perSchedule = Math.max(settledKiB, endKiB);
  const s = (ms: number | undefined): string => (ms === undefined ? 'n/a' : `${(ms / 1000).toFixed(1)} s`);
  const producing = Math.max(loaded.takeoverMs ?? 0, loaded.firstEnqueueMs ?? 0);
  const lag = m.enqueueLagMs;
  const everyTick = m.enqueued === m.due && m.available === m.due && m.unexpected === 0 && m.streamWhole;
  const missing = m.missing.length === 0 ? '' : `; not available, e.g. ${m.missing.slice(0, 3).map((t) => `${t.id}@${t.tick} (job ${t.job}, ledger ${t.ledger})`).join(', ')}`;
  const slowest = m.slowest.slice(0, 3).map((t) => `${t.jobId} ${t.lagMs} ms`).join(', ') || 'n/a';
  const n = int(m.schedules);
  return [
    `| 8 | Setup of the million rows: ${n} distinct hourly ids through \`schedules.upsert\`, ${m.inFlight} in flight${scale} | ${int(m.upsertsPerSecond)} upserts/s; ` +
      `Redis \`used_memory\` ${m.redisUsedMiB.toFixed(0)} MiB with them stored | | | (context) | |`,
    `| 8 | Leader RSS with ${n} runtime schedules (hourly, spread over the hour) over 0 schedules: at takeover + ${SETTLE_MS / 1000} s / after ${windowS} s of ticking${scale} | ` +
      `RSS ${loaded.settled.rssMiB.toFixed(0)} / ${loaded.end.rssMiB.toFixed(0)} MiB, heap ${loaded.settled.heapUsedMiB.toFixed(0)} / ${loaded.end.heapUsedMiB.toFixed(0)} MiB: ` +
      `${settledKiB.toFixed(2)} / ${endKiB.toFixed(2)} KiB per schedule; leader CPU ${loaded.cpuMsPerSecond.toFixed(0)} ms/s | ` +
      `0 schedules: RSS ${idle.settled.rssMiB.toFixed(0)} / ${idle.end.rssMiB.toFixed(0)} MiB (after ${Math.round((idle.end.at - idle.settled.at) / 1000)} s), heap ${idle.settled.heapUsedMiB.toFixed(0)} / ${idle.end.heapUsedMiB.toFixed(0)} MiB | | ` +
      `≤ 1 KiB per schedule (the larger of the two) | ${verdict(perSchedule <= 1)} |`,
    `| 8 | Takeover with ${n} runtime schedules, by a new leader after a previous one stopped: process start → producing (the later of the producer's ` +
      `"every job taken over" and its first run in BullMQ)${scale} | ${s(producing)} (taken over ${s(loaded.takeoverMs)}; first run ${s(loaded.firstEnqueueMs)}) | ` +
      `0 schedules: ${s(idle.takeoverMs)} | | ≤ 10 s | ${verdict(producing <= 10_000)} |`,
    ...(m.first
      ? [
          `| 8 | The first leader right after the bulk write of the ${n} (no leader had looked at them yet), until the due index held only the due soon${scale} | ` +
            `taken over ${s(m.first.takeoverMs)} (first run ${s(m.first.firstEnqueueMs)}); all but the due soon parked ${s(m.first.parkedMs)} after its process start; ` +
            `peak RSS ${m.first.peakRssMiB.toFixed(0)} MiB, heap ${m.first.peakHeapUsedMiB.toFixed(0)} MiB${m.first.stoppedCleanly ? '' : '; **killed at its stop**'} | | | (context) | |`,
          ...takeoverLagRow(n, m.first.takeoverLag, m.first.bullmqTakeoverLag, scale, verdict),
        ]
      : []),
    `| 8 | Enqueue lag, ${n} hourly runtime schedules (${int(m.schedules / 3600)} ticks/s) over ${windowS} s: run available to workers − nominal tick (median / p99 / max; ` +
      `BullMQ's event stream); due ticks of the window enqueued${scale} | ${show(lag)}; ${int(m.enqueued)} of ${int(m.due)} due enqueued, ${int(m.available)} available, ` +
      `${int(m.within100Ms)} within 100 ms; ${m.unexpected} runs of ticks not due${m.streamWhole ? '' : '; **the event stream was trimmed**'}${missing}; latest ${slowest} | | | ` +
      `p99 ≤ 100 ms; every due tick enqueued | ${verdict((lag?.p99 ?? Infinity) <= 100 && everyTick)} |`,
  ];
}

function render(): string {
  const sections = Object.fromEntries(SECTIONS.map((section) => [section, load(section)])) as { [S in Section]: Stored<Results[S]> | undefined };
  const m = Object.values(sections).find((stored) => stored)?.machine;
  const when = SECTIONS.map((section) => `${section} ${sections[section]?.measuredAt.slice(0, 16).replace('T', ' ') ?? 'not measured'}`).join(', ');
  const missing = (section: Section): string[] => [`| | ${section}: not measured yet (\`npm run bench -- --only ${section}\`) | | | | | |`];
  // A column for the `--baseline` commit only while a stored section measured one; the other rows leave it empty.
  const baselineColumn = Boolean(sections['instance-precision']?.data.baseline ?? sections['redis-bytes']?.data.baseline);
  const rows = [
    ...(sections.failover ? failoverRows(sections.failover.data) : missing('failover')),
    ...(sections.candidates ? candidatesRows(sections.candidates.data) : missing('candidates')),
    ...(sections.precision ? precisionRows(sections.precision.data) : missing('precision')),
    ...(sections.throughput ? throughputRows(sections.throughput.data) : missing('throughput')),
    ...(sections.leader && Array.isArray(sections.leader.data) ? leaderRows(sections.leader.data) : missing('leader')),
    ...(sections.coordination ? coordinationRows(sections.coordination.data) : missing('coordination')),
    ...(sections.instance ? instanceRows(sections.instance.data) : missing('instance')),
    ...(sections.durability ? durabilityRows(sections.durability.data) : missing('durability')),
    ...(sections.schedules ? scheduleRows(sections.schedules.data) : missing('schedules')),
    ...(sections.backfill ? backfillRows(sections.backfill.data) : missing('backfill')),
    ...(sections['instance-precision'] ? [] : missing('instance-precision')),
    ...(sections['redis-bytes'] ? [] : missing('redis-bytes')),
  ].map((row) => (baselineColumn ? addBaselineCell(row) : row));
  const lines = [
    `Generated by \`npm run bench\`; each section's measurement (UTC): ${when}. ` +
      (m ? `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; redis-server ${m.redis}; BullMQ ${m.bullmq}. ` : '') +
      `Failover trials use short election timings: LeaseDuration ${FAILOVER_TIMINGS.leaseDurationMs} ms, RenewDeadline ${FAILOVER_TIMINGS.renewDeadlineMs} ms, ` +
      `RetryPeriod ${FAILOVER_TIMINGS.retryPeriodMs} ms. Precision schedules all use \`${PRECISION_PATTERN}\` (every 5 s, all firing together), with one ` +
      `BullMQ worker (concurrency 100) in its own process for both systems; each precision row was measured ${PRECISION_RUNS} times, the systems alternating.`,
    '',
    `| # | Comparison | leasebeat |${baselineColumn ? ` ${BASELINE_HEADER} |` : ''} Baseline or bound | Ratio | Goal | Met |`,
    `|---|---|---|${baselineColumn ? '---|' : ''}---|---|---|---|`,
    ...rows,
    ...(sections['instance-precision'] ? instancePrecisionRows(sections['instance-precision'].data, baselineColumn) : []),
    ...(sections['redis-bytes'] ? redisBytesRows(sections['redis-bytes'].data, baselineColumn) : []),
  ];
  const coordination = sections.coordination?.data;
  if (coordination) {
    lines.push(
      '',
      'Coordination detail, commands per minute by name (leader; one follower):',
      '',
      ...coordination.map(({ lock, instances }) => {
        const leader = instances.find((i) => i.role === 'leader')!;
        const follower = instances.find((i) => i.role === 'follower')!;
        const top = (list: Array<[string, number]>): string => list.map(([name, n]) => `${name} ${n.toFixed(0)}`).join(', ');
        const api = lock === 'kubernetes' ? ` API: leader ${top(leader.apiByMethod)}; follower ${top(follower.apiByMethod)}.` : '';
        return `- ${lock} lock: Redis: leader ${top(leader.redisByCommand)}; follower ${top(follower.redisByCommand)}.${api}`;
      }),
    );
  }
  return lines.join('\n');
}

function writeDoc(generated: string): void {
  const block = `${START}\n${generated}\n${END}`;
  if (!existsSync(DOC)) {
    writeFileSync(DOC, `# Benchmarks\n\n${block}\n`);
    return;
  }
  const doc = readFileSync(DOC, 'utf8');
  const from = doc.indexOf(START);
  const to = doc.indexOf(END);
  writeFileSync(DOC, from >= 0 && to > from ? doc.slice(0, from) + block + doc.slice(to + END.length) : `${doc.trimEnd()}\n\n${block}\n`);
}

/** The sections that measure a `--baseline` commit beside this checkout. */
const BASELINE_SECTIONS: Section[] = ['instance-precision', 'redis-bytes'];

const argv = process.argv.slice(2);
const sections = selected(argv);
const { baseline: rev, ...scale } = benchArgs(argv);
if (rev !== undefined && !sections.some((section) => BASELINE_SECTIONS.includes(section))) {
  process.stderr.write(`bench: --baseline measures only ${BASELINE_SECTIONS.join(', ')}; add them, e.g. --only ${BASELINE_SECTIONS.join(',')}\n`);
  process.exit(2);
}
const baseline = rev === undefined ? undefined : await openBaseline(rev, progress);
try {
  await run(sections, { ...scale, trees: { current: currentTree(progress), ...(baseline ? { baseline: baseline.tree } : {}) } });
} finally {
  baseline?.remove();
}
const generated = render();
writeDoc(generated);
console.log(generated);
progress(`bench: written to ${DOC}`);
