import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { RunTimeoutError } from '../../src/workers/run-deadline.js';
import type { WorkerMetrics, WorkerPool } from '../../src/workers/worker-pool.js';
import { createMetrics } from '../../src/serving/metrics.js';
import type { HandlerContext } from '../../src/scheduling/define-job.js';
import { testWorkerPool } from '../support/worker-pool.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';
import { RunRecorder } from '../support/run-recorder.js';
import { until } from '../support/until.js';

/** The workers' lock duration: renewed every half of it, it outlasts a loaded machine's stalls of the event loop. */
const LOCK_MS = 2_000;

/** Resolves once `ctx.signal` has aborted; a handler that awaits it and then goes on ignores its signal. */
const aborted = (ctx: HandlerContext): Promise<void> => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));

describe("Run timeouts (a definition's `timeout`) on a real Redis and BullMQ", () => {
  const redis = useRedis();
  const silent = pino({ level: 'silent' });
  let queue: Queue;
  let events: QueueEvents;
  let eventsConnection: Redis;
  let pools: WorkerPool[] = [];

  /** `n` pools on the suite's server, standing in for `n` instances, each running `jobs`. */
  const instances = (n: number, jobs: Array<ReturnType<typeof scheduledJob>>, logger = silent, metrics?: WorkerMetrics): WorkerPool[] => {
    // A short lock: a timed-out run whose lock were not renewed while its handler goes on would be
    // handed to another instance by the stalled-job check within LOCK_MS and a half.
    pools = Array.from({ length: n }, (_, i) =>
      testWorkerPool({ connection: redis.client, logger, metrics, identity: `instance-${i}`, tuning: { lockDurationMs: LOCK_MS, stalledIntervalMs: 500 } }),
    );
    for (const pool of pools) pool.update(new Map(jobs.map((job) => [job.name, job])));
    return pools;
  };

  redis.beforeClose(async () => {
    await Promise.all(pools.map((pool) => pool.close(1000)));
    await events?.close();
    eventsConnection?.disconnect();
    await queue?.close();
  });
  beforeEach(async () => {
    await Promise.all(pools.map((pool) => pool.close(1000)));
    pools = [];
    queue ??= new Queue('leasebeat', { connection: redis.client });
    if (!events) {
      eventsConnection = redis.server.client();
      events = new QueueEvents('leasebeat', { connection: eventsConnection });
      await events.waitUntilReady();
    }
    await queue.obliterate({ force: true });
  });

  it('aborts the signal at the deadline and fails the run with a timeout error, whatever the handler returns then', async () => {
    let reason: unknown;
    instances(1, [scheduledJob({ name: 'bounded', timeout: '1s', handler: async (_job, ctx) => {
      await aborted(ctx);
      reason = ctx.signal.reason;
      return 'stopped late';
    } })]);
    const run = await queue.add('bounded', tickJobData(), { jobId: 'bounded@1', attempts: 1 });
    const started = performance.now();
    await assert.rejects(run.waitUntilFinished(events, 10_000), /run bounded@1 timed out after 1s; its handler stopped \d+ ms after the deadline$/);
    assert.ok(performance.now() - started >= 950, 'not before its deadline');
    assert.ok(reason instanceof RunTimeoutError && reason.stoppedAfterMs === undefined, 'the handler is told why its signal aborted');
  });

  // Issue 31, finding 4: with `attempts: 3` and a handler that ignored its signal past the grace, attempts
  // 0, 1 and 2 of one tick ran at the same time: the timed-out attempt was failed (and retried, its slot
  // freed) while its handler still ran.
  it('a handler that stops within the grace keeps its slot and lock until it has: each retry starts after it, on any instance', { timeout: 40_000 }, async () => {
    const recorder = new RunRecorder(() => performance.now());
    let heldPastDeadline = 0;
    const job = scheduledJob({ name: 'slow', timeout: '1s', timeoutGrace: '10s', attempts: 3, handler: recorder.handler('any', async (job, ctx) => {
      if (job.attemptsMade === 2) return 'done';
      await aborted(ctx);
      // Ignores its signal for longer than the lock lasts unrenewed.
      await sleep(LOCK_MS + 500);
      if (pools.some((pool) => pool.activeJobIds().includes(`leasebeat/${job.id}`))) heldPastDeadline++;
      return 'too late';
    }) });
    instances(2, [job]);
    const run = await queue.add('slow', tickJobData(), { jobId: 'slow@1', attempts: 3 });
    assert.equal(await run.waitUntilFinished(events, 30_000), 'done');
    assert.deepEqual(recorder.overlaps(), [], 'no two handlers of the run at once');
    assert.deepEqual(recorder.runs.map((r) => r.attempt), [0, 1, 2]);
    assert.equal(heldPastDeadline, 2, 'a timed-out run keeps its slot until its handler stops');
    const failures = (await queue.getJob('slow@1'))?.stacktrace ?? [];
    assert.equal(failures.length, 2, failures.join('\n'));
    for (const failure of failures) assert.match(failure, /^RunTimeoutError: run slow@1 timed out after 1s; its handler stopped \d+ ms after the deadline\n/);
  });

  it('a handler that does not stop within the grace is let go and its run made final: no retry runs beside it, and its record says so', { timeout: 40_000 }, async () => {
    const recorder = new RunRecorder(() => performance.now());
    const errors: string[] = [];
    const log = pino({ level: 'error' }, { write: (line: string) => void errors.push((JSON.parse(line) as { msg: string }).msg) });
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const { registry, workerMetrics } = createMetrics();
    const letGo = async (): Promise<string | undefined> => (await registry.metrics()).split('\n').find((line) => line.startsWith('leasebeat_handlers_let_go{job="stubborn"}'));
    instances(2, [scheduledJob({ name: 'stubborn', timeout: '1s', timeoutGrace: '200ms', attempts: 3, handler: recorder.handler('any', () => stuck) })], log, workerMetrics);
    try {
      const run = await queue.add('stubborn', tickJobData(), { jobId: 'stubborn@1', attempts: 3 });
      await assert.rejects(run.waitUntilFinished(events, 20_000));
      // Failed for good while its one handler still hangs: an unfinished handler counts as running until now.
      assert.deepEqual(recorder.overlaps(), [], 'no two handlers of the run at once');
      assert.deepEqual(recorder.runs.map((r) => [r.attempt, r.end]), [[0, undefined]], 'one handler of the run, still running');
      const failed = await queue.getJob('stubborn@1');
      assert.equal(failed?.attemptsMade, 1, 'not retried');
      assert.equal(
        failed?.failedReason,
        'run stubborn@1 timed out after 1s; its handler did not stop within its 200ms grace (it ignores ctx.signal): the run is made final, not retried, and the handler is let go (it may still be running)',
      );
      const record = JSON.parse((await redis.client.hget('bull:leasebeat:stubborn@1', 'leasebeatFinish')) ?? '{}') as { o?: string; f?: boolean; v?: string };
      assert.deepEqual({ o: record.o, f: record.f, v: record.v }, { o: 'failed', f: true, v: failed?.failedReason });
      assert.ok(errors.some((msg) => msg.startsWith('a handler past its timeout did not stop within its grace')), errors.join(' | '));
      assert.equal(await letGo(), 'leasebeat_handlers_let_go{job="stubborn"} 1', 'reported as let go');
      const finished = (await registry.metrics()).split('\n').filter((line) => line.startsWith('leasebeat_runs_finished_total{job="stubborn"') && !line.endsWith(' 0'));
      assert.deepEqual(finished, ['leasebeat_runs_finished_total{job="stubborn",outcome="timed-out"} 1'], 'told from a thrown error');
    } finally {
      release();
    }
    await until('the handler let go to stop', () => recorder.runs.every((r) => r.end !== undefined));
    await until('the gauge to count it stopped', async () => (await letGo()) === 'leasebeat_handlers_let_go{job="stubborn"} 0');
  });

  it("a handler let go is not waited on: the job's next run starts in its slot", async () => {
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    instances(1, [scheduledJob({ name: 'hung', timeout: '1s', timeoutGrace: '200ms', handler: async () => {
      started++;
      await stuck;
    } })]);
    try {
      const run = await queue.add('hung', tickJobData(), { jobId: 'hung@1', attempts: 1 });
      await assert.rejects(run.waitUntilFinished(events, 10_000), /did not stop within its 200ms grace/);
      // Its slot is free (concurrency 1): the next tick's run starts while the first handler still hangs.
      await queue.add('hung', tickJobData(), { jobId: 'hung@2', attempts: 1 });
      await until('the next run to start', () => started === 2, 5_000);
    } finally {
      release();
    }
  });

  it('leaves a run that ends in time alone', async () => {
    instances(1, [scheduledJob({ name: 'quick', timeout: '5s', handler: () => 'done' })]);
    const run = await queue.add('quick', tickJobData(), { jobId: 'quick@1' });
    assert.equal(await run.waitUntilFinished(events, 10_000), 'done');
  });
});
