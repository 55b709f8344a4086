/**
 * The leader's memory over time with `schedules` hourly runtime schedules spread over the hour (the
 * million rows' shape, bench/million-schedules.ts), at a scale of one's choosing: a private redis-server,
 * the schedules written through `schedules.upsert`, a first leader until it parked all but the due soon,
 * then the measured leader (a new one, as after a failover) for `windowS` seconds after it settled. Prints
 * its RSS and heap every sample and, at the end, both at the start and end of the window with their
 * slope (least squares over the window's samples), MiB/min, and the least heap of each minute (what the
 * collections keep) with its slope. With `--snapshots <dir>`, the measured
 * leader writes a heap snapshot there at the start and at the end of the window (compare them by
 * constructor in Chrome's DevTools, Comparison view).
 *
 *   node --import tsx bench/leader-memory.ts <schedules> <window s> [--snapshots <dir>]
 *
 * Every process it starts (redis-server, the leaders) is stopped when it ends, on error or Ctrl-C too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { createAdmin } from '../src/index.js';
import type { MemorySample } from './million-leader-process.js';
import { cronOf } from './takeover-lag.js';
import { firstLeaderParked } from './million-schedules.js';
import { rate } from './rate.js';
import { BENCH_JOB_TYPE, jobTypeFolder } from './schedules-leader-process.js';

const SAMPLE_MS = 5_000;
const SETTLE_MS = 10_000;
const UPSERTS_IN_FLIGHT = 64;


const children = new Set<ChildProcess>();
/** Kills every process this run started (SIGKILL: nothing of theirs is kept). */
function killChildren(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

function started(command: string, args: string[], options: { cwd?: string } = {}): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], ...options });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(killer);
}

async function redisServer(dir: string): Promise<{ url: string; redis: Redis }> {
  const port = 20_000 + (process.pid % 5_000);
  const child = started('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]);
  // A client that does not retry by itself per attempt, until the server answers.
  for (let tries = 0; ; tries++) {
    const probe = new Redis({ port, lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (error) {
      if (tries > 100 || child.exitCode !== null) throw error;
      await sleep(100);
    } finally {
      probe.disconnect();
    }
  }
  const redis = new Redis({ port });
  return { url: `redis://127.0.0.1:${port}`, redis };
}

interface Leader {
  child: ChildProcess;
  samples: MemorySample[];
  takenOverMs(): number | undefined;
}

function leader(url: string, nodeFlags: string[]): Leader {
  const script = new URL('./million-leader-process.ts', import.meta.url).pathname;
  const child = started(process.execPath, [...nodeFlags, '--import', 'tsx', script, url, String(SAMPLE_MS)]);
  const samples: MemorySample[] = [];
  let takenOver: number | undefined;
  createInterface({ input: child.stdout! }).on('line', (text) => {
    if (!text.startsWith('{')) return;
    const line = JSON.parse(text) as { takenOver?: number; sample?: MemorySample };
    if (line.takenOver !== undefined) takenOver = line.takenOver;
    if (line.sample) samples.push(line.sample);
  });
  return { child, samples, takenOverMs: () => takenOver };
}

async function until(what: string, condition: () => boolean | Promise<boolean>, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the leader exited before ${what}`);
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs / 1000} s`);
    await sleep(500);
  }
}

/** Least-squares slope of `value` over the samples, per minute. */
function slopePerMinute(samples: MemorySample[], value: (s: MemorySample) => number): number {
  const xs = samples.map((s) => s.at / 60_000);
  const ys = samples.map(value);
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return num / den;
}

/** Has the leader write a heap snapshot (SIGUSR2, into its working directory `cwd`) and moves it to `dir` as `name`. */
async function snapshot(child: ChildProcess, cwd: string, dir: string, name: string): Promise<void> {
  const before = new Set(await readdir(cwd));
  child.kill('SIGUSR2');
  let written: string | undefined;
  for (let size = -1; ; await sleep(2_000)) {
    written ??= (await readdir(cwd)).find((file) => file.endsWith('.heapsnapshot') && !before.has(file));
    if (!written) continue;
    // Done once its size stopped changing (V8 streams it out).
    const now = (await stat(path.join(cwd, written))).size;
    if (now === size && now > 0) break;
    size = now;
  }
  await rename(path.join(cwd, written), path.join(dir, name));
}

const args = process.argv.slice(2);
const [schedules, windowS] = [Number(args[0]), Number(args[1])];
const snapshotIndex = args.indexOf('--snapshots');
const snapshotDir = snapshotIndex >= 0 ? path.resolve(args[snapshotIndex + 1]!) : undefined;
if (!Number.isInteger(schedules) || schedules <= 0 || !Number.isInteger(windowS) || windowS <= 0) {
  process.stderr.write('usage: node --import tsx bench/leader-memory.ts <schedules> <window s> [--snapshots <dir>]\n');
  process.exit(2);
}
const say = (line: string): void => void process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
const work = await mkdtemp(path.join(tmpdir(), 'leasebeat-leader-memory-'));
const jobs = await jobTypeFolder();
try {
  const { url, redis } = await redisServer(work);
  say(`writing ${schedules} hourly schedules spread over the hour`);
  const admin = createAdmin({ connection: url, jobsDir: jobs });
  const perSecond = await rate(schedules, UPSERTS_IN_FLIGHT, (i) => admin.schedules.upsert(`t${i}`, { job: BENCH_JOB_TYPE, schedule: cronOf(i), data: { tenant: i } }));
  await admin.close();
  say(`  ${Math.round(perSecond)} upserts/s`);

  const first = leader(url, []);
  await until('the first leader parked', async () => (await firstLeaderParked(redis, schedules)).parked, first.child, 15 * 60_000);
  say('  the first leader parked all but the due soon; stopping it');
  await stop(first.child);

  if (snapshotDir) await mkdir(snapshotDir, { recursive: true });
  const measured = leader(url, snapshotDir ? ['--heapsnapshot-signal=SIGUSR2'] : []);
  await until('the takeover', () => measured.takenOverMs() !== undefined, measured.child, 15 * 60_000);
  const windowStart = Date.now() + SETTLE_MS;
  say(`  the measured leader took over in ${measured.takenOverMs()} ms; window of ${windowS} s from ${new Date(windowStart).toISOString()}`);
  await until('the settled sample', () => measured.samples.some((s) => s.at >= windowStart), measured.child, 60_000);
  if (snapshotDir) await snapshot(measured.child, process.cwd(), snapshotDir, 'start.heapsnapshot');
  const windowEnd = windowStart + windowS * 1000;
  let shown = 0;
  await until(
    'the end of the window',
    () => {
      for (const s of measured.samples.slice(shown)) say(`  +${Math.round((s.at - windowStart) / 1000)} s: RSS ${s.rssMiB.toFixed(1)} MiB, heap ${s.heapUsedMiB.toFixed(1)} MiB of ${s.heapTotalMiB.toFixed(1)}, external ${s.externalMiB.toFixed(1)} MiB`);
      shown = measured.samples.length;
      return measured.samples.some((s) => s.at >= windowEnd);
    },
    measured.child,
    windowS * 1000 + 120_000,
  );
  if (snapshotDir) await snapshot(measured.child, process.cwd(), snapshotDir, 'end.heapsnapshot');
  await stop(measured.child);
  await redis.quit();
  const window = measured.samples.filter((s) => s.at >= windowStart && s.at <= windowEnd + SAMPLE_MS);
  const [start, end] = [window[0]!, window.at(-1)!];
  const rss = slopePerMinute(window, (s) => s.rssMiB);
  const heap = slopePerMinute(window, (s) => s.heapUsedMiB);
  // The heap in use swings with the garbage between collections: its least value of each minute is what
  // the collections keep (the live heap), and what a leak of live objects raises.
  const floors: MemorySample[] = [];
  for (let at = windowStart; at + 60_000 <= windowEnd + SAMPLE_MS; at += 60_000) {
    const minute = window.filter((s) => s.at >= at && s.at < at + 60_000);
    if (minute.length > 0) floors.push(minute.reduce((least, s) => (s.heapUsedMiB < least.heapUsedMiB ? s : least)));
  }
  const floor = floors.length > 1 ? slopePerMinute(floors, (s) => s.heapUsedMiB) : NaN;
  say(
    `result: ${schedules} schedules, ${Math.round((end.at - start.at) / 1000)} s: RSS ${start.rssMiB.toFixed(1)} → ${end.rssMiB.toFixed(1)} MiB (${rss.toFixed(2)} MiB/min), ` +
      `heap ${start.heapUsedMiB.toFixed(1)} → ${end.heapUsedMiB.toFixed(1)} MiB (${heap.toFixed(2)} MiB/min), ` +
      `heap floor per minute ${floors.map((s) => s.heapUsedMiB.toFixed(1)).join(' / ')} MiB (${floor.toFixed(2)} MiB/min)`,
  );
} finally {
  killChildren();
  await rm(work, { recursive: true, force: true });
  await rm(jobs, { recursive: true, force: true });
}
process.exit(0);
