/**
 * `npm run bench`: every comparison of the benchmark issue in one run, on this machine, printed as one
 * Markdown table and written to docs/benchmarks.md (between its bench markers; the prose around them is
 * kept). Progress goes to stderr.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spread, type Spread } from '../scripts/chaos/report.js';
import type { ElectionTimings } from '../scripts/chaos/plan.js';
import { startRedis } from '../test/support/redis-server.js';
import { measureCoordination, type CoordinationResult } from './coordination.js';
import { measureFailover, type FailoverResult } from './failover.js';
import { measureLeaderCost } from './leader-cost.js';
import type { LeaderCost } from './leader-process.js';
import { machineFacts, type MachineFacts } from './machine.js';
import { bullmqPrecision, leasebeatPrecision, PRECISION_PATTERN, type PrecisionResult } from './precision.js';
import { measureThroughput, type ThroughputResult } from './throughput.js';

const DOC = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
const START = '<!-- bench:start -->';
const END = '<!-- bench:end -->';

/** Short election timings for the failover trials, so 80 trials fit in a few minutes. */
const FAILOVER_TIMINGS: ElectionTimings = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 250 };
/** The defaults users run with (15 s / 10 s / 2 s), for the coordination load. */
const DEFAULT_TIMINGS: ElectionTimings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 };
const FAILOVER_TRIALS = 20;
const PRECISION_SIZES = [1000, 10_000];
const LEADER_SCHEDULES = 10_000;
const LEADER_WINDOW_MS = 20_000;
const COORDINATION_WARMUP_MS = 10_000;
const COORDINATION_WINDOW_MS = 45_000;

const progress = (line: string): void => void process.stderr.write(`${line}\n`);

interface Results {
  machine: MachineFacts;
  failover: FailoverResult[];
  precision: PrecisionResult[];
  throughput: ThroughputResult;
  leader: LeaderCost;
  idle: LeaderCost;
  coordination: CoordinationResult[];
  seconds: number;
}

async function run(): Promise<Results> {
  const started = Date.now();
  const machine = machineFacts();
  progress(`bench: ${machine.cpu}, ${machine.cores} cores, node ${machine.node}, redis ${machine.redis}`);

  progress(`1/5 failover: ${FAILOVER_TRIALS} crashes and ${FAILOVER_TRIALS} releases per lock`);
  const failover = [
    ...(await measureFailover('redis', FAILOVER_TRIALS, FAILOVER_TIMINGS, progress)),
    ...(await measureFailover('kubernetes', FAILOVER_TRIALS, FAILOVER_TIMINGS, progress)),
  ];

  const server = await startRedis();
  const redis = server.client();
  try {
    progress('2/5 tick precision: leasebeat vs BullMQ Job Schedulers');
    const precision: PrecisionResult[] = [];
    for (const size of PRECISION_SIZES) {
      for (const measure of [leasebeatPrecision, bullmqPrecision]) {
        const result = await measure(redis, server.url, size);
        progress(`  ${result.system} ${size}: enqueue lag ${show(result.enqueueLagMs)}, start lag ${show(result.startLagMs)}, ${result.delivered}/${result.expected} runs`);
        precision.push(result);
      }
    }

    progress('3/5 enqueue throughput');
    await redis.flushall();
    const throughput = await measureThroughput(redis);
    progress(`  ${JSON.stringify(throughput)}`);

    progress(`4/5 leader cost at ${LEADER_SCHEDULES} schedules`);
    const leader = await measureLeaderCost(redis, server.url, LEADER_SCHEDULES, LEADER_WINDOW_MS);
    const idle = await measureLeaderCost(redis, server.url, 0, LEADER_WINDOW_MS / 3);
    progress(`  ${JSON.stringify(leader)}; idle ${JSON.stringify(idle)}`);

    progress(`5/5 coordination load: 3 idle instances per lock, default timings, ${COORDINATION_WINDOW_MS / 1000} s`);
    const coordination = await Promise.all(
      (['redis', 'kubernetes'] as const).map((lock) => measureCoordination(lock, 3, DEFAULT_TIMINGS, COORDINATION_WARMUP_MS, COORDINATION_WINDOW_MS)),
    );
    return { machine, failover, precision, throughput, leader, idle, coordination, seconds: Math.round((Date.now() - started) / 1000) };
  } finally {
    redis.disconnect();
    await server.close();
  }
}

const show = (s: Spread | undefined): string => (s ? `${s.median} / ${s.p99} / ${s.max} ms` : 'n/a');
const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const ratio = (a: number, b: number): string => `${(a / b).toFixed(2)}×`;
const met = (ok: boolean): string => (ok ? 'yes' : '**no**');

function failoverRows(results: FailoverResult[]): string[] {
  const { leaseDurationMs: lease, retryPeriodMs: retry } = FAILOVER_TIMINGS;
  return results.map(({ lock, kind, samplesMs }) => {
    const bound = kind === 'crash' ? lease + 1.2 * retry : 1.2 * retry;
    const measured = samplesMs.filter((ms) => !Number.isNaN(ms));
    const s = spread(measured);
    const within = measured.filter((ms) => ms <= bound).length;
    const label = kind === 'crash' ? 'crash (SIGKILL of the leader)' : 'release (SIGTERM of the leader)';
    const boundText = kind === 'crash' ? `${bound} ms (LeaseDuration + 1.2 × RetryPeriod)` : `${bound} ms (1.2 × RetryPeriod)`;
    return `| 1 | Failover, ${lock} lock, ${label}: fault → first enqueue by the new leader, ${samplesMs.length} trials | ` +
      `${s ? `${s.min} / ${s.median} / ${s.p99} ms` : 'n/a'} (min / median / p99) | bound ${boundText} | ${within}/${samplesMs.length} within | ` +
      `every trial within its bound | ${met(within === samplesMs.length)} |`;
  });
}

function precisionRows(results: PrecisionResult[]): string[] {
  const rows: string[] = [];
  for (const size of PRECISION_SIZES) {
    const ours = results.find((r) => r.system === 'leasebeat' && r.schedules === size)!;
    const theirs = results.find((r) => r.system === 'bullmq' && r.schedules === size)!;
    const p99 = ours.enqueueLagMs?.p99 ?? Infinity;
    const goals = [`p99 ≤ BullMQ's`, ...(size === 1000 ? ['p99 < 10 ms'] : [])];
    const ok = p99 <= (theirs.enqueueLagMs?.p99 ?? Infinity) && (size !== 1000 || p99 < 10);
    rows.push(
      `| 2 | Enqueue lag, ${int(size)} schedules: run available to workers − nominal tick (median / p99 / max) | ${show(ours.enqueueLagMs)} | ` +
        `BullMQ Job Schedulers: ${show(theirs.enqueueLagMs)} | p99 ${ratio(p99, theirs.enqueueLagMs?.p99 ?? NaN)} | ${goals.join('; ')} | ${met(ok)} |`,
      `| 2 | Handler-start lag, ${int(size)} schedules: worker takes the run − nominal tick (median / p99 / max); runs that came to exist | ` +
        `${show(ours.startLagMs)}; ${ours.delivered}/${ours.expected} | BullMQ: ${show(theirs.startLagMs)}; ${theirs.delivered}/${theirs.expected} | ` +
        `p99 ${ratio(ours.startLagMs?.p99 ?? NaN, theirs.startLagMs?.p99 ?? NaN)} | (context) | |`,
    );
  }
  return rows;
}

function throughputRows(t: ThroughputResult): string[] {
  return [
    `| 3 | Enqueue throughput, sequential (1 in flight) | fenced: ${int(t.fencedSequential)} jobs/s | raw \`Queue.add\`: ${int(t.rawSequential)} jobs/s | ` +
      `${ratio(t.fencedSequential, t.rawSequential)} | ≥ 0.7× | ${met(t.fencedSequential / t.rawSequential >= 0.7)} |`,
    `| 3 | Enqueue throughput, ${t.inFlight} in flight | fenced: ${int(t.fencedInFlight)} jobs/s | raw \`Queue.add\`: ${int(t.rawInFlight)} jobs/s | ` +
      `${ratio(t.fencedInFlight, t.rawInFlight)} | ≥ 0.7× | ${met(t.fencedInFlight / t.rawInFlight >= 0.7)} |`,
    `| 3 | Enqueue throughput vs \`addBulk\` (${t.bulkSize} per call) | fenced, ${t.inFlight} in flight: ${int(t.fencedInFlight)} jobs/s | ` +
      `\`addBulk\`: ${int(t.addBulk)} jobs/s | ${ratio(t.fencedInFlight, t.addBulk)} | (context) | |`,
  ];
}

function leaderRows(leader: LeaderCost, idle: LeaderCost): string[] {
  return [
    `| 4 | Leader cost, ${int(leader.schedules)} schedules (each once a minute, spread over the seconds): CPU and RSS over ${leader.windowMs / 1000} s | ` +
      `${leader.cpuMsPerSecond.toFixed(1)} ms CPU/s (${((leader.cpuMsPerSecond / 1000) * 100).toFixed(1)}% of a core), RSS ${leader.rssMiB.toFixed(0)} MiB, ` +
      `heap ${leader.heapUsedMiB.toFixed(0)} MiB; ${leader.enqueued} enqueues; takeover ${(leader.takeoverMs / 1000).toFixed(1)} s | ` +
      `0 schedules: ${idle.cpuMsPerSecond.toFixed(1)} ms CPU/s, RSS ${idle.rssMiB.toFixed(0)} MiB | | (context) | |`,
  ];
}

function coordinationRows(results: CoordinationResult[]): string[] {
  return results.map(({ lock, instances }) => {
    const leader = instances.find((i) => i.role === 'leader')!;
    const followers = instances.filter((i) => i.role === 'follower');
    const average = (pick: (i: (typeof instances)[number]) => number): number => followers.reduce((sum, i) => sum + pick(i), 0) / followers.length;
    const api = lock === 'kubernetes' ? `Lease API ${int(leader.apiRequestsPerMinute)} req/min, ` : '';
    const apiFollower = lock === 'kubernetes' ? `Lease API ${int(average((i) => i.apiRequestsPerMinute))} req/min, ` : '';
    return `| 5 | Coordination load, ${lock} lock, 3 idle instances, default timings (15 s / 10 s / 2 s), per instance | ` +
      `leader: ${api}Redis ${int(leader.redisCommandsPerMinute)} cmd/min | follower (mean of ${followers.length}): ${apiFollower}Redis ${int(average((i) => i.redisCommandsPerMinute))} cmd/min | | (context) | |`;
  });
}

function render(results: Results): string {
  const m = results.machine;
  const lines = [
    `Generated by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)} in ${Math.round(results.seconds / 60)} min. ` +
      `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; redis-server ${m.redis}; BullMQ ${m.bullmq}. ` +
      `Failover trials use short election timings: LeaseDuration ${FAILOVER_TIMINGS.leaseDurationMs} ms, RenewDeadline ${FAILOVER_TIMINGS.renewDeadlineMs} ms, ` +
      `RetryPeriod ${FAILOVER_TIMINGS.retryPeriodMs} ms. Precision schedules all use \`${PRECISION_PATTERN}\` (every 5 s, all firing together), with one ` +
      'BullMQ worker (concurrency 100) in its own process for both systems.',
    '',
    '| # | Comparison | leasebeat | Baseline or bound | Ratio | Goal | Met |',
    '|---|---|---|---|---|---|---|',
    ...failoverRows(results.failover),
    ...precisionRows(results.precision),
    ...throughputRows(results.throughput),
    ...leaderRows(results.leader, results.idle),
    ...coordinationRows(results.coordination),
    '',
    'Coordination detail, commands per minute by name (leader; one follower):',
    '',
    ...results.coordination.map(({ lock, instances }) => {
      const leader = instances.find((i) => i.role === 'leader')!;
      const follower = instances.find((i) => i.role === 'follower')!;
      const top = (list: Array<[string, number]>): string => list.map(([name, n]) => `${name} ${n.toFixed(0)}`).join(', ');
      const api = lock === 'kubernetes' ? ` API: leader ${top(leader.apiByMethod)}; follower ${top(follower.apiByMethod)}.` : '';
      return `- ${lock} lock: Redis: leader ${top(leader.redisByCommand)}; follower ${top(follower.redisByCommand)}.${api}`;
    }),
  ];
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

const results = await run();
const generated = render(results);
writeDoc(generated);
console.log(generated);
progress(`bench: written to ${DOC}`);
