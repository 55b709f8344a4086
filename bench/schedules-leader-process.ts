/**
 * A whole leasebeat instance (through `createScheduler`, workers off) in its own process, over the runtime
 * schedules already stored on its Redis. Prints one JSON line: how long from the process start until every
 * schedule was taken over, its memory then, and, after `edits` edits of stored schedules made by a client
 * in this process, how long each edit took to go live on this leader (its
 * `leasebeat_schedule_apply_lag_seconds` hook).
 *
 *   node --import tsx bench/schedules-leader-process.ts <redis url> <edits>
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { spread, type Spread } from '../scripts/chaos/report.js';

export interface ScheduleLeaderReport {
  schedules: number;
  /** From the process start until every schedule was taken over (the producer's "every job taken over"). */
  takeoverMs: number;
  rssMiB: number;
  heapUsedMiB: number;
  /** Write → in force on this leader, per edit, ms. */
  applyLagMs: Spread | undefined;
  edits: number;
}

/** The bench's job type, in a folder of its own (`.mjs`: no tsx hooks). */
export const BENCH_JOB_TYPE = 'tenant-report';
export async function jobTypeFolder(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-schedules-bench-'));
  await writeFile(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  await writeFile(path.join(dir, `${BENCH_JOB_TYPE}.mjs`), `export default { name: '${BENCH_JOB_TYPE}', handler: () => undefined };\n`);
  return dir;
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const [url, edits] = process.argv.slice(2) as [string, string];
  const dir = await jobTypeFolder();
  let takenOver: number | undefined;
  // The log line the producer writes once every job is taken over is the instant it produces for all of them.
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.includes('"every job taken over"')) takenOver ??= performance.now();
      done();
    },
  });
  const lags: number[] = [];
  const { createAdmin, createScheduler } = await import('../src/index.js');
  const scheduler = createScheduler({
    connection: url,
    jobsDir: dir,
    workers: false,
    identity: `bench-schedules-${process.pid}`,
    logger: pino({ level: 'info' }, logs),
    metrics: { schedules: { applied: (lagSeconds) => void lags.push(lagSeconds * 1000) } },
  });
  await scheduler.start();
  while (takenOver === undefined) await sleep(10);
  await sleep(2_000);
  const memory = process.memoryUsage();
  const admin = createAdmin({ connection: url, jobsDir: dir });
  const stored = (await admin.schedules.list({ limit: 1 })).total;
  lags.length = 0;
  // Sequential edits of stored schedules, as a tenant's settings page would make them.
  for (let i = 0; i < Number(edits); i++) {
    await admin.schedules.upsert(`t${i}`, { job: BENCH_JOB_TYPE, every: '1h', data: { tenant: i, edit: 1 } });
    await sleep(20);
  }
  await sleep(500);
  const report: ScheduleLeaderReport = {
    schedules: stored,
    // performance.now() counts from the process' start.
    takeoverMs: Math.round(takenOver),
    rssMiB: memory.rss / 2 ** 20,
    heapUsedMiB: memory.heapUsed / 2 ** 20,
    applyLagMs: spread(lags.map((lag) => Math.round(lag))),
    edits: Number(edits),
  };
  console.log(JSON.stringify(report));
  await admin.close();
  await scheduler.stop();
  await rm(dir, { recursive: true, force: true });
}
