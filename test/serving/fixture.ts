import { Queue } from 'bullmq';
import type { InstanceSource, ReadinessCheck, StatusSnapshot } from '../../src/serving/sources.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

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
  checks: ReadinessCheck[];
  snapshot: StatusSnapshot;
  queueList: Queue[];
}

export function fixedSource(queueList: Queue[]): FixedSource {
  const source: FixedSource = {
    identity: IDENTITY,
    livenessError: undefined,
    readinessFailure: undefined,
    checks: [
      { name: 'redis', ok: true },
      { name: 'jobs', ok: true, detail: '1 job loaded' },
      { name: 'elector', ok: true },
    ],
    snapshot: sampleSnapshot(),
    queueList,
    liveness: () => source.livenessError,
    readiness: () => (source.readinessFailure ? Promise.reject(source.readinessFailure) : Promise.resolve(source.checks)),
    status: () => Promise.resolve(source.snapshot),
    queues: () => source.queueList,
  };
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
