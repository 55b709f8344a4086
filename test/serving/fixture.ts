import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import { tickJobId } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { manualJobId } from '../../src/producing/manual-triggers.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { testWorkerPool } from '../support/worker-pool.js';
import { HistoryReader } from '../../src/serving/history.js';
import type { InstanceSource, JobStatus, ReadinessCheck, StatusSnapshot } from '../../src/serving/sources.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';
import { until } from '../support/until.js';

export const IDENTITY = 'pod-a_4f1c';
export const LEADER = 'pod-b_91e0';
/** A job id in the shape the producer uses (`<job>@<tick>`), added for real to the `reports` queue. */
export const LAST_JOB_ID = 'nightly-report@1767225600000';

/** A fixed status document with one healthy job and one job that fails to load. */
export function sampleSnapshot(): StatusSnapshot {
  return {
    instance: { identity: IDENTITY, role: 'follower', startedAt: '2026-01-01T00:00:00.000Z', version: '0.1.0' },
    cluster: {
      lock: 'redis leasebeat/leasebeat',
      leader: LEADER,
      term: { generation: 'gen-7d2a', leaderTransitions: 3, acquireTime: '2026-01-01T00:00:05.000Z' },
      members: [
        { identity: LEADER, role: 'leader', lastSeen: '2026-01-01T00:10:00.000Z' },
        { identity: IDENTITY, role: 'follower', lastSeen: '2026-01-01T00:10:01.000Z' },
      ],
    },
    jobs: [
      {
        name: 'nightly-report',
        file: 'jobs/nightly-report.ts',
        queue: 'reports',
        schedule: '0 3 * * *',
        timezone: 'Europe/Berlin',
        paused: false,
        nextRuns: ['2026-01-02T02:00:00.000Z', '2026-01-03T02:00:00.000Z', '2026-01-04T02:00:00.000Z', '2026-01-05T02:00:00.000Z'],
        lastTick: '2026-01-01T02:00:00.000Z',
        lastJobId: LAST_JOB_ID,
        enqueued: 12,
        skipped: { overlap: 2, paused: 1 },
        fenced: 1,
      },
      {
        name: '<img src=x onerror=alert(1)>',
        file: 'jobs/</script><b>x.ts',
        queue: 'cleanup',
        schedule: '*/5 * * * *',
        timezone: 'UTC',
        paused: true,
        pauseNote: 'db migration <b>until</b> 14:00',
        nextRuns: [],
        lastTick: null,
        lastJobId: null,
        enqueued: 0,
        skipped: {},
        fenced: 0,
      },
    ],
    loadErrors: [{ file: 'jobs/broken.ts', message: 'schedule: invalid cron expression "61 * * * *"' }],
  };
}

/** An `InstanceSource` that returns whatever the test puts in its fields: a data source, not a mock. */
export interface FixedSource extends InstanceSource {
  livenessError: Error | undefined;
  /** When set, `readiness()` rejects with it instead of answering. */
  readinessFailure: Error | undefined;
  /** When set, `status()` rejects with it instead of answering (Redis down, say). */
  statusFailure: Error | undefined;
  checks: ReadinessCheck[];
  snapshot: StatusSnapshot;
  queueList: Queue[];
}

export function fixedSource(queueList: Queue[]): FixedSource {
  const source: FixedSource = {
    identity: IDENTITY,
    livenessError: undefined,
    readinessFailure: undefined,
    statusFailure: undefined,
    checks: [
      { name: 'redis', ok: true },
      { name: 'jobs', ok: true, detail: '1 job loaded' },
      { name: 'elector', ok: true },
    ],
    snapshot: sampleSnapshot(),
    queueList,
    liveness: () => source.livenessError,
    readiness: () => (source.readinessFailure ? Promise.reject(source.readinessFailure) : Promise.resolve(source.checks)),
    status: () => (source.statusFailure ? Promise.reject(source.statusFailure) : Promise.resolve(source.snapshot)),
    queues: () => source.queueList,
  };
  // `history` is left unset (a source without one) unless a test assigns it.
  return source;
}

/** A real Redis with two real BullMQ queues: `reports` (2 waiting jobs) and `cleanup` (1 delayed job). */
export interface QueueWorld {
  redis: TestRedis;
  reports: Queue;
  cleanup: Queue;
  /** Opens another queue on the same Redis; closed by `close()`. */
  queue(name: string): Queue;
  close(): Promise<void>;
}

export async function startQueueWorld(): Promise<QueueWorld> {
  const redis = await startRedis();
  const opened: Queue[] = [];
  const queue = (name: string): Queue => {
    const created = new Queue(name, { connection: { host: '127.0.0.1', port: redis.port }, prefix: 'leasebeat-test' });
    opened.push(created);
    return created;
  };
  const reports = queue('reports');
  const cleanup = queue('cleanup');
  await reports.add('nightly-report', { tick: 1767225600000 }, { jobId: LAST_JOB_ID });
  await reports.add('nightly-report', { tick: 1767312000000 }, { jobId: 'nightly-report@1767312000000' });
  await cleanup.add('sweep', {}, { delay: 3_600_000 });
  return {
    redis,
    reports,
    cleanup,
    queue,
    close: async () => {
      await Promise.all(opened.map((q) => q.close()));
      await redis.close();
    },
  };
}

/** `Authorization` header value for basic auth. */
export function basicAuth(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

/** The jobs `seedHistory` records ticks for, as the status API lists them. */
export const HISTORY_JOBS = ['heartbeat', 'invoice-sync'] as const;

/** A history over real records: the ledger, BullMQ runs by leasebeat's own workers, and the Redis lease's writes. */
export interface SeededHistory {
  reader: HistoryReader;
  /** Status rows for the seeded jobs, to put beside them in a snapshot. */
  jobs: JobStatus[];
  /** The nominal tick of each fate the strips must show, by job. */
  ticks: Record<(typeof HISTORY_JOBS)[number], Record<'ran' | 'late' | 'failed' | 'skipped' | 'pending', number>>;
  /** The three terms written, in order: released, expired, current. */
  holders: [string, string, string];
  /** The job id of the one manual run, of `invoice-sync`. */
  manualJobId: string;
  /** The ticks of `staged-sync`: one staged and started late, one staged and started on time. */
  staged: { late: number; onTime: number };
  close(): Promise<void>;
}

const MINUTE = 60_000;

/**
 * Writes half an hour of history into `redis` the way leasebeat does, through the real ledger scripts,
 * real BullMQ jobs run by a real `WorkerPool`, and the Redis lock's own writes:
 * - `heartbeat` (queue `ops`), every minute: mostly on time, two late enqueues (1.4 s and 2.5 s), one run
 *   that fails, one tick skipped for overlap, a range of 5 ticks missed while nobody led, and the newest
 *   tick claimed but not yet in BullMQ;
 * - `invoice-sync` (queue `billing`), every 5 minutes, all on time, and one manual run (`leasebeat trigger`) now;
 * - `staged-sync` (queue `ops`): two runs staged ahead of their ticks, one started 10 s late, one on time;
 * - leadership: pod-a leads and releases, pod-b leads and dies (its lease expires), pod-c leads now.
 */
export async function seedHistory(redis: TestRedis): Promise<SeededHistory> {
  const connection = redis.client();
  const keys = new KeySpace('leasebeat-test', 'history');
  const ledger = new TickLedger(connection, keys);
  const queues = {
    ops: new Queue('ops', { connection, prefix: 'leasebeat-test' }),
    billing: new Queue('billing', { connection, prefix: 'leasebeat-test' }),
  };
  const now = Date.now();
  const start = Math.floor(now / MINUTE) * MINUTE - 30 * MINUTE;
  const token = { generation: 'gen-7d2a', leaderTransitions: 2 };
  assert.deepEqual(await ledger.raiseFence(token, 'pod-c', now), { ok: true });

  const heartbeat = { ran: 0, late: 0, failed: 0, skipped: 0, pending: 0 };
  let previous: number | undefined;
  const run = async (job: string, queue: Queue, tick: number, lagMs: number, data: Record<string, unknown> = {}): Promise<void> => {
    const jobId = tickJobId(job, tick);
    const outcome = await ledger.claim(token, job, tick, jobId, previous === undefined ? {} : { previousTick: previous });
    assert.equal(outcome.kind, 'claimed', `claim of ${jobId}`);
    // A run added ahead of its tick (negative lag) waits in BullMQ's delayed set until the tick: staged.
    await queue.add(job, tickJobData(data, tick), { jobId, timestamp: tick + lagMs, ...(lagMs < 0 ? { delay: -lagMs } : {}) });
    await ledger.confirm(token, job, tick, jobId, tick + lagMs);
    previous = tick;
  };
  for (let i = 0; i < 30; i++) {
    const tick = start + i * MINUTE;
    if (i >= 12 && i <= 16) {
      if (i === 12) {
        assert.equal(await ledger.skipRange(token, 'heartbeat', { from: tick, to: tick + 4 * MINUTE, count: 5, reason: 'missed-window' }), 'recorded');
        previous = tick + 4 * MINUTE;
      }
      continue;
    }
    if (i === 7) {
      assert.equal((await ledger.claim(token, 'heartbeat', tick, tickJobId('heartbeat', tick), { skip: 'overlap', previousTick: previous! })).kind, 'skipped');
      heartbeat.skipped = tick;
      previous = tick;
      continue;
    }
    if (i === 29) {
      assert.equal((await ledger.claim(token, 'heartbeat', tick, tickJobId('heartbeat', tick), { previousTick: previous! })).kind, 'claimed');
      heartbeat.pending = tick;
      continue;
    }
    const lag = i === 20 ? 2_500 : i === 24 ? 1_400 : 4 + ((i * 7) % 23);
    await run('heartbeat', queues.ops, tick, lag, i === 22 ? { fail: true } : {});
    if (i === 20) heartbeat.late = tick;
    else if (i === 22) heartbeat.failed = tick;
    else heartbeat.ran = tick;
  }
  previous = undefined;
  const sync = { ran: 0, late: 0, failed: 0, skipped: 0, pending: 0 };
  for (let i = 0; i < 6; i++) {
    const tick = start + i * 5 * MINUTE;
    await run('invoice-sync', queues.billing, tick, 6 + i * 3);
    sync.ran = tick;
  }
  // `staged-sync` (queue `ops`): a run staged 2 s ahead of its tick, which no worker started until 10 s
  // after it (late by its start); a second one comes below, staged and started on time.
  previous = undefined;
  const staged = { late: now - 10_000, onTime: 0 };
  await run('staged-sync', queues.ops, staged.late, -2_000);

  const workerConnection = redis.client();
  const pool = testWorkerPool({ connection: workerConnection, prefix: 'leasebeat-test', logger: pino({ level: 'silent' }) });
  pool.update(new Map([
    ['heartbeat', scheduledJob({ name: 'heartbeat', queue: 'ops', handler: (job) => {
      if ((job.data as { data?: { fail?: boolean } }).data?.fail) throw new Error('upstream answered 503');
      return 'ok';
    } })],
    ['invoice-sync', scheduledJob({ name: 'invoice-sync', queue: 'billing', handler: () => 'ok' })],
    ['staged-sync', scheduledJob({ name: 'staged-sync', queue: 'ops', handler: () => 'ok' })],
  ]));
  const settled = (ops: number, billing: number) => async (): Promise<boolean> => {
    const [opsCounts, billingCounts] = await Promise.all([queues.ops.getJobCounts('completed', 'failed'), queues.billing.getJobCounts('completed')]);
    return opsCounts.completed! + opsCounts.failed! === ops && billingCounts.completed === billing;
  };
  await until('the seeded runs to finish', settled(24, 6));
  // With the workers idle, so that they start these at once: the trigger of a run, recorded as the
  // leader's trigger desk records one, and a run staged ahead of its tick, which BullMQ promotes at the tick.
  const manualId = manualJobId('invoice-sync', 'request-1');
  const request = { job: 'invoice-sync', id: 'request-1', deadline: Date.now() + 60_000 };
  assert.equal((await ledger.claimTrigger(token, request, manualId, '')).kind, 'claimed');
  await queues.billing.add('invoice-sync', { ...tickJobData({}, Date.now()), manual: true }, { jobId: manualId });
  assert.equal(await ledger.confirmTrigger(token, 'invoice-sync', 'request-1', manualId, JSON.stringify({ jobId: manualId, queue: 'billing', flow: false })), 'enqueued');
  staged.onTime = Date.now() + 300;
  await run('staged-sync', queues.ops, staged.onTime, -300);
  await until('the manual run and the staged one to finish', settled(25, 7));
  await pool.close(1000);
  workerConnection.disconnect();

  const lock = new RedisLeaseLock({ connection, name: 'history', prefix: 'leasebeat-test', identity: 'pod-a' });
  const signal = new AbortController().signal;
  const lease = (holderIdentity: string, leaderTransitions: number, acquireTime: number, renewTime: number) => ({
    holderIdentity, leaseDurationSeconds: 15, acquireTime, renewTime, leaderTransitions,
  });
  let version = await lock.create(lease('pod-a', 0, start, start), signal);
  for (const renew of [2, 4, 8]) version = await lock.update(lease('pod-a', 0, start, start + renew * MINUTE), version, signal);
  version = await lock.update(lease('', 0, start, start + 8 * MINUTE), version, signal);
  const bAt = start + 8 * MINUTE + 1_000;
  version = await lock.update(lease('pod-b', 1, bAt, bAt), version, signal);
  version = await lock.update(lease('pod-b', 1, bAt, start + 12 * MINUTE), version, signal);
  const cAt = start + 12 * MINUTE + 15_000 + 2_300;
  version = await lock.update(lease('pod-c', 2, cAt, cAt), version, signal);
  await lock.update(lease('pod-c', 2, cAt, now), version, signal);

  const reader = new HistoryReader({
    redis: connection,
    keys,
    jobs: () => [{ name: 'heartbeat', queue: queues.ops }, { name: 'invoice-sync', queue: queues.billing }, { name: 'staged-sync', queue: queues.ops }],
    leaseHistoryKey: lock.historyKey,
  });
  const status = (name: string, queue: string, schedule: string, lastTick: number, enqueued: number, skipped: Record<string, number>): JobStatus => ({
    name, file: `jobs/${name}.ts`, queue, schedule, timezone: 'UTC', paused: false,
    nextRuns: [1, 2, 3].map((n) => new Date(Math.ceil(now / MINUTE) * MINUTE + (n - 1) * MINUTE).toISOString()),
    lastTick: new Date(lastTick).toISOString(), lastJobId: null, enqueued, skipped, fenced: 0,
  });
  return {
    reader,
    jobs: [
      status('heartbeat', 'ops', '* * * * *', heartbeat.pending, 23, { overlap: 1, 'missed-window': 5 }),
      status('invoice-sync', 'billing', '*/5 * * * *', sync.ran, 6, {}),
      status('staged-sync', 'ops', 'every 10s', staged.onTime, 2, {}),
    ],
    ticks: { heartbeat, 'invoice-sync': sync },
    holders: ['pod-a', 'pod-b', 'pod-c'],
    manualJobId: manualId,
    staged,
    close: async () => {
      await Promise.all([queues.ops.close(), queues.billing.close()]);
      connection.disconnect();
    },
  };
}
