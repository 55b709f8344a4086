/**
 * `npm run bench`: every comparison of the benchmark issues, on this machine, printed as one Markdown
 * table and written to docs/benchmarks.md (between its bench markers; the prose around them is kept).
 * `npm run bench -- --only failover,candidates` measures some sections again; the others are rendered from
 * their last stored results (test-results/bench/results/), each with the time it was measured. Progress
 * goes to stderr.
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
/** How many electors contend for a released lease in the candidates section. */
const CANDIDATES = 20;
const PRECISION_SIZES = [1000, 10_000];
const LEADER_SCHEDULES = 10_000;
const LEADER_WINDOW_MS = 20_000;
const COORDINATION_WARMUP_MS = 10_000;
const COORDINATION_WINDOW_MS = 45_000;

const progress = (line: string): void => void process.stderr.write(`${line}\n`);

/** Each section's last results are kept here, so that one section can be measured again on its own. */
const RESULTS_DIR = fileURLToPath(new URL('../test-results/bench/results/', import.meta.url));

/** What each section measured, as stored; a section missing from a run is rendered from its last results. */
interface Results {
  failover: FailoverResult[];
  candidates: CandidatesResult[];
  precision: PrecisionResult[];
  throughput: ThroughputResult;
  leader: { leader: LeaderCost; idle: LeaderCost };
  coordination: CoordinationResult[];
}
type Section = keyof Results;
const SECTIONS: Section[] = ['failover', 'candidates', 'precision', 'throughput', 'leader', 'coordination'];

interface Stored<T> {
  measuredAt: string;
  machine: MachineFacts;
  seconds: number;
  data: T;
}

/** Measures one section. Sections that need a plain Redis share one, started here. */
async function measure<S extends Section>(section: S, redisUrl: () => Promise<{ redis: Redis; url: string }>): Promise<Results[S]> {
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
      for (const size of PRECISION_SIZES) {
        for (const run of [leasebeatPrecision, bullmqPrecision]) {
          const result = await run(redis, url, size);
          progress(`  ${result.system} ${size}: enqueue lag ${show(result.enqueueLagMs)}, start lag ${show(result.startLagMs)}, ${result.delivered}/${result.expected} runs`);
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
      progress(`leader cost at ${LEADER_SCHEDULES} schedules`);
      const { redis, url } = await redisUrl();
      const leader = await measureLeaderCost(redis, url, LEADER_SCHEDULES, LEADER_WINDOW_MS);
      const idle = await measureLeaderCost(redis, url, 0, LEADER_WINDOW_MS / 3);
      progress(`  ${JSON.stringify(leader)}; idle ${JSON.stringify(idle)}`);
      return { leader, idle } as Results[S];
    }
    case 'coordination': {
      progress(`coordination load: 3 idle instances per lock, default timings, ${COORDINATION_WINDOW_MS / 1000} s`);
      const results = await Promise.all(
        (['redis', 'kubernetes'] as const).map((lock) => measureCoordination(lock, 3, DEFAULT_TIMINGS, COORDINATION_WARMUP_MS, COORDINATION_WINDOW_MS)),
      );
      return results as Results[S];
    }
  }
  throw new Error(`unknown section ${String(section)}`);
}

/** Runs the sections asked for (`--only a,b`; default all), storing each one's results as it finishes. */
async function run(sections: Section[]): Promise<void> {
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
      const data = await measure(section, redisUrl);
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
  return results.map(({ lock, kind, samplesMs, staleEnqueues }) => {
    const measured = samplesMs.filter((ms) => !Number.isNaN(ms));
    const s = spread(measured);
    const p99 = s?.p99 ?? Infinity;
    const fence = `${staleEnqueues} stale enqueues`;
    const cells = s ? `${s.min} / ${s.median} / ${s.p99} ms (min / median / p99); ${fence}` : `n/a; ${fence}`;
    const head = `| 1 | Failover, ${lock} lock, ${label[kind]}: fault → first enqueue by the new leader, ${samplesMs.length} trials | ${cells}`;
    if (kind === 'release') {
      const goal = lock === 'redis' ? 100 : 150;
      return `${head} | client-go polling: up to 2.2 × RetryPeriod = ${2.2 * retry} ms | | p99 ≤ ${goal} ms; no stale enqueue | ${met(measured.length === samplesMs.length && p99 <= goal && staleEnqueues === 0)} |`;
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

function render(): string {
  const sections = Object.fromEntries(SECTIONS.map((section) => [section, load(section)])) as { [S in Section]: Stored<Results[S]> | undefined };
  const m = Object.values(sections).find((stored) => stored)?.machine;
  const when = SECTIONS.map((section) => `${section} ${sections[section]?.measuredAt.slice(0, 16).replace('T', ' ') ?? 'not measured'}`).join(', ');
  const missing = (section: Section): string[] => [`| | ${section}: not measured yet (\`npm run bench -- --only ${section}\`) | | | | | |`];
  const lines = [
    `Generated by \`npm run bench\`; each section's measurement (UTC): ${when}. ` +
      (m ? `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; Node ${m.node}; redis-server ${m.redis}; BullMQ ${m.bullmq}. ` : '') +
      `Failover trials use short election timings: LeaseDuration ${FAILOVER_TIMINGS.leaseDurationMs} ms, RenewDeadline ${FAILOVER_TIMINGS.renewDeadlineMs} ms, ` +
      `RetryPeriod ${FAILOVER_TIMINGS.retryPeriodMs} ms. Precision schedules all use \`${PRECISION_PATTERN}\` (every 5 s, all firing together), with one ` +
      'BullMQ worker (concurrency 100) in its own process for both systems.',
    '',
    '| # | Comparison | leasebeat | Baseline or bound | Ratio | Goal | Met |',
    '|---|---|---|---|---|---|---|',
    ...(sections.failover ? failoverRows(sections.failover.data) : missing('failover')),
    ...(sections.candidates ? candidatesRows(sections.candidates.data) : missing('candidates')),
    ...(sections.precision ? precisionRows(sections.precision.data) : missing('precision')),
    ...(sections.throughput ? throughputRows(sections.throughput.data) : missing('throughput')),
    ...(sections.leader ? leaderRows(sections.leader.data.leader, sections.leader.data.idle) : missing('leader')),
    ...(sections.coordination ? coordinationRows(sections.coordination.data) : missing('coordination')),
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

await run(selected(process.argv.slice(2)));
const generated = render();
writeDoc(generated);
console.log(generated);
progress(`bench: written to ${DOC}`);
