/**
 * Stores `count` schedules, `inFlight` writes at once, in a process of its own: through a code tree's own
 * `createAdmin(...).schedules.upsert` (so a baseline writes its own format), or through BullMQ's
 * `Queue.upsertJobScheduler`. Prints one JSON line: upserts per second, or why the tree cannot.
 *
 *   node --import tsx bench/schedule-upserts.ts <tree dir | bullmq> <redis url> <kind> <count> <in flight> <jobs dir>
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { startChild } from './child.js';
import { rate } from './rate.js';
import { BENCH_JOB_TYPE } from './schedules-leader-process.js';

/**
 * `burst`: every schedule on `*\/5 * * * * *` (firing together every 5 s); `cron-spread`: schedule i daily at
 * minute i mod 60 of hour ⌊i / 60⌋ mod 24 (`m h * * *`); `every-1h`: every hour.
 */
export type UpsertKind = 'burst' | 'cron-spread' | 'every-1h';
export const BURST_PATTERN = '*/5 * * * * *';
/** The queue the BullMQ side's schedulers and worker use. */
export const BULLMQ_QUEUE = 'bench';

const patternOf = (kind: UpsertKind, i: number): string | undefined =>
  kind === 'burst' ? BURST_PATTERN : kind === 'cron-spread' ? `${i % 60} ${Math.floor(i / 60) % 24} * * *` : undefined;

type Report = { perSecond: number } | { unsupported: string };

/** What a tree's admin must offer for runtime schedules (runtime schedules came after some baselines). */
interface TreeAdmin {
  schedules?: { upsert(id: string, spec: Record<string, unknown>): Promise<unknown> };
  close(): Promise<void>;
}
type CreateAdmin = (options: { connection: string; jobsDir: string }) => TreeAdmin;

/** Runs the upserts in a child; answers upserts per second, or the reason the tree cannot store them. */
export async function upsertSchedules(
  system: string,
  url: string,
  kind: UpsertKind,
  count: number,
  inFlight: number,
  jobsDir = '',
): Promise<{ perSecond?: number; unsupported?: string }> {
  const child = startChild('./schedule-upserts.ts', [system, url, kind, String(count), String(inFlight), jobsDir]);
  try {
    return JSON.parse(await child.line((l) => l.startsWith('{'), 3_600_000)) as Report;
  } finally {
    await child.stop();
  }
}

async function upsertThroughTree(tree: string, url: string, kind: UpsertKind, count: number, inFlight: number, jobsDir: string): Promise<Report> {
  const { createAdmin } = (await import(pathToFileURL(path.join(tree, 'src/index.ts')).href)) as { createAdmin?: CreateAdmin };
  if (createAdmin === undefined) return { unsupported: 'no createAdmin' };
  const admin = createAdmin({ connection: url, jobsDir });
  try {
    const schedules = admin.schedules;
    if (schedules === undefined) return { unsupported: 'no runtime schedules' };
    const spec = (i: number): Record<string, unknown> => {
      const pattern = patternOf(kind, i);
      return { job: BENCH_JOB_TYPE, ...(pattern === undefined ? { every: '1h' } : { schedule: pattern }), data: { tenant: i } };
    };
    return { perSecond: await rate(count, inFlight, (i) => schedules.upsert(`s${i}`, spec(i))) };
  } finally {
    await admin.close();
  }
}

async function upsertThroughBullmq(url: string, kind: UpsertKind, count: number, inFlight: number): Promise<Report> {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new Queue(BULLMQ_QUEUE, { connection });
  try {
    const perSecond = await rate(count, inFlight, (i) => {
      const pattern = patternOf(kind, i);
      return queue.upsertJobScheduler(`s${i}`, pattern === undefined ? { every: 3_600_000 } : { pattern }, { name: BENCH_JOB_TYPE, data: { tenant: i } });
    });
    return { perSecond };
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [system, url, kind, count, inFlight, jobsDir] = process.argv.slice(2) as [string, string, UpsertKind, string, string, string];
  const report =
    system === 'bullmq'
      ? await upsertThroughBullmq(url, kind, Number(count), Number(inFlight))
      : await upsertThroughTree(system, url, kind, Number(count), Number(inFlight), jobsDir);
  console.log(JSON.stringify(report));
  // A baseline's modules may leave timers behind; the report is out, so nothing is lost.
  process.exit(0);
}
