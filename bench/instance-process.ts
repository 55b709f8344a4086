/**
 * A whole leasebeat instance in its own process, through the public API (`createScheduler`, workers on):
 * `count` schedules from one job file, all firing every minute, so each minute is a burst of `count` runs.
 * Prints one JSON line when it leads (start-up time, counted from the process start), then, after `bursts`
 * bursts were run, samples its memory every `sampleMs` for `windowMs` and prints the result as one JSON line.
 *
 *   node --import tsx bench/instance-process.ts <redis url> <count> <window ms> <sample ms> <bursts>
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface InstanceSample {
  /** Since the window began. */
  atMs: number;
  rssMiB: number;
  heapUsedMiB: number;
  /** Runs finished on this instance since it started. */
  runs: number;
}

export interface InstanceProcessReport {
  schedules: number;
  /** From the process start until it led: Node's boot, the library's import, loading the jobs, the election. */
  startupMs: number;
  /** Of which `scheduler.start()` (the jobs loaded, registered as a member, workers started). */
  startMs: number;
  bursts: number;
  samples: InstanceSample[];
}

const RUNS = Symbol.for('leasebeat.bench.runs');
/** A burst of 10,000 runs finishes in seconds; this only bounds a stuck instance. */
const BURST_BOUND_MS = 150_000;

const [url, count, windowMs, sampleMs, bursts] = process.argv.slice(2).map((arg, i) => (i === 0 ? arg : Number(arg))) as [string, number, number, number, number];
const dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-instance-'));
await writeFile(path.join(dir, 'package.json'), '{ "type": "module" }\n');
// One file of many definitions, as a user with one schedule per tenant would write it; `.mjs`, so no tsx hooks.
await writeFile(
  path.join(dir, 'tenants.mjs'),
  `const runs = Symbol.for(${JSON.stringify(RUNS.description)});\n` +
    'const handler = () => { globalThis[runs] = (globalThis[runs] ?? 0) + 1; };\n' +
    `export default Array.from({ length: ${count} }, (_, i) => ({ name: \`tenant-\${i}\`, schedule: '* * * * *', data: { tenant: i }, removeOnComplete: 1000, removeOnFail: 1000, handler }));\n`,
);
const runs = (): number => ((globalThis as Record<symbol, number | undefined>)[RUNS] ?? 0);

const { createScheduler } = await import('../src/index.js');
const scheduler = createScheduler({ connection: url, jobsDir: dir, identity: `bench-instance-${process.pid}` });
const starting = performance.now();
await scheduler.start();
const startMs = performance.now() - starting;
while (!scheduler.elector.isLeader()) await sleep(10);
const startupMs = performance.now();
console.log(JSON.stringify({ event: 'leading', startupMs, startMs }));

const burstsDeadline = Date.now() + bursts * 60_000 + BURST_BOUND_MS;
while (runs() < bursts * count && Date.now() < burstsDeadline) await sleep(250);
if (runs() < bursts * count) throw new Error(`only ${runs()} of ${bursts * count} runs finished within ${bursts} bursts`);

const samples: InstanceSample[] = [];
const from = performance.now();
for (;;) {
  const memory = process.memoryUsage();
  samples.push({ atMs: Math.round(performance.now() - from), rssMiB: memory.rss / 2 ** 20, heapUsedMiB: memory.heapUsed / 2 ** 20, runs: runs() });
  if (performance.now() - from >= windowMs) break;
  await sleep(Math.min(sampleMs, windowMs - (performance.now() - from)));
}
const report: InstanceProcessReport = { schedules: count, startupMs, startMs, bursts, samples };
console.log(JSON.stringify(report));
await scheduler.stop();
await rm(dir, { recursive: true, force: true });
