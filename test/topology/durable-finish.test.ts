import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { directWrites, ReplicaWait, type WritePath } from '../../src/redis/durability.js';
import { RunRecords, type StartKind } from '../../src/workers/run-records.js';
import { WorkerPool, type WorkerMetrics, type WorkerTuning } from '../../src/workers/worker-pool.js';
import type { HandlerContext } from '../../src/scheduling/define-job.js';
import type { RedisProcess } from '../support/redis-process.js';
import { useRedis } from '../support/redis-server.js';
import { replicasOnline, startDataNode } from '../support/replicated-redis.js';
import { scheduledJob, tickJobData } from '../support/scheduled-job.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

/**
 * "A Redis failover re-ran finished runs": the primary of BullMQ's slot died right after the handlers
 * returned; BullMQ's record of the completion never reached the promoted replica, the run sat in active
 * with a lock nobody renewed, and stalled-job recovery ran it again. Reproduced here with real processes,
 * the instant of the kill chosen through proxies: a primary P, and a replica R that replicates from it
 * through a proxy the test holds at will; the worker reaches P through a proxy too, which the test moves
 * to R once R is promoted.
 */

const QUEUE = 'leasebeat';
const LOCK_MS = 2_000;
const TUNING: WorkerTuning = { lockDurationMs: LOCK_MS, stalledIntervalMs: 1_000 };
const logger = pino({ level: 'silent' });

const jobKey = (id: string): string => `bull:${QUEUE}:${id}`;
const completedKey = `bull:${QUEUE}:completed`;

/** What the pool's metric hooks were told, in order. */
function recordedMetrics() {
  const seen = { started: [] as Array<[string, StartKind]>, notRunAgain: [] as Array<[string, string]>, finishUnrecorded: [] as string[] };
  const hooks: WorkerMetrics = {
    started: (job, kind) => void seen.started.push([job, kind]),
    notRunAgain: (job, reason) => void seen.notRunAgain.push([job, reason]),
    finishUnrecorded: (job) => void seen.finishUnrecorded.push(job),
  };
  return { seen, hooks };
}

/** A worker pool whose runs' takes and finishes go through `writes` (confirmed on replicas, or direct). */
function workerPool(connection: Redis, writes: WritePath, identity: string, metrics: WorkerMetrics): WorkerPool {
  return new WorkerPool({ connection, logger, tuning: TUNING, records: new RunRecords(writes, identity), metrics });
}

type Handler = (context: HandlerContext) => unknown;
const definitions = (name: string, handler: Handler) => new Map([[name, scheduledJob({ name, handler: (_job, context) => handler(context) })]]);

/**
 * P; R, replicating from P through `replication`; R2, replicating from R (so that R, once promoted, has a
 * replica to confirm on); the worker's connection, to P through `workerLink`.
 */
interface FailoverTopology {
  p: RedisProcess;
  r: RedisProcess;
  replication: TcpProxy;
  workerLink: TcpProxy;
  /** Direct clients, for ground truth. */
  onP: Redis;
  onR: Redis;
  worker: Redis;
  /** Called with each chunk the worker sends, before it is forwarded (or held). */
  onWorkerData: ((chunk: Buffer, connection: number) => void) | undefined;
  /** Reply chunks handed to the worker on its connection `connection` so far. */
  deliveries(connection: number): number;
  close(): Promise<void>;
}

async function failoverTopology(): Promise<FailoverTopology> {
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-durable-finish-'));
  const p = await startDataNode(dir);
  const replication = await TcpProxy.start({ port: p.port });
  const r = await startDataNode(dir, replication.port);
  const r2 = await startDataNode(dir, r.port);
  const onP = p.client({ maxRetriesPerRequest: null });
  const onR = r.client({ maxRetriesPerRequest: null });
  const onR2 = r2.client({ maxRetriesPerRequest: null });
  await replicasOnline(onP, 1);
  await replicasOnline(onR, 1);
  const delivered = new Map<number, number>();
  const hooks: Pick<FailoverTopology, 'onWorkerData'> = { onWorkerData: undefined };
  const workerLink = await TcpProxy.start(
    { port: p.port },
    {
      onClientData: (chunk, connection) => hooks.onWorkerData?.(chunk, connection),
      onDelivered: (_chunk, connection) => void delivered.set(connection, (delivered.get(connection) ?? 0) + 1),
    },
  );
  const worker = new Redis({ host: '127.0.0.1', port: workerLink.port, maxRetriesPerRequest: null });
  worker.on('error', () => undefined);
  return Object.assign(hooks, {
    p,
    r,
    replication,
    workerLink,
    onP,
    onR,
    worker,
    deliveries: (connection: number) => delivered.get(connection) ?? 0,
    close: async () => {
      worker.disconnect();
      for (const client of [onP, onR, onR2]) client.disconnect();
      await Promise.all([workerLink.close(), replication.close()]);
      await Promise.all([p.kill(), r.kill(), r2.kill()]);
      await rm(dir, { recursive: true, force: true });
    },
  });
}

describe('a run finished once stays finished across a failover (P, its replica R through a proxy; the worker through a proxy)', () => {
  /**
   * When the worker reaches the promoted R: `at once` (it still holds the run there: it sees that R lost the
   * completion and makes it again), or `once the run's lock expired on R` (stalled-job recovery brings the run
   * back, and its take finds the run's finish record). Either way the handler must not run again.
   */
  const reconnections = [
    { when: 'at once', lockExpired: false },
    { when: "once the run's lock expired on R", lockExpired: true },
  ];
  for (const { when, lockExpired } of reconnections) {
    it(`P dies right after it took the completion, which never reached R; the worker reaches the promoted R ${when}: the finish is recorded again, the handler does not run again`, { timeout: 45_000 }, async (test) => {
      const t = await failoverTopology();
      const metrics = recordedMetrics();
      const pool = workerPool(t.worker, new ReplicaWait(t.worker, { minReplicas: 1, timeoutMs: 500 }), 'worker-1', metrics.hooks);
      const queue = new Queue(QUEUE, { connection: t.onP });
      queue.on('error', () => undefined);
      const jobId = 'finisher@1';
      let runs = 0;
      try {
        // The instant BullMQ's completion (moveToFinished: its keys name the queue's completed set) is about
        // to be forwarded to P, P's replication is held: P takes the completion, R never sees it.
        let completionOn: number | undefined;
        t.onWorkerData = (chunk, connection) => {
          const text = chunk.toString('latin1');
          if (completionOn !== undefined || !text.includes(completedKey) || !text.includes(jobId)) return;
          completionOn = connection;
          t.replication.partition('blackhole');
        };
        pool.update(definitions('finisher', () => ({ ran: ++runs })));
        await queue.add('finisher', tickJobData(), { jobId });
        await until('P to hold the completion', async () => (await t.onP.zscore(completedKey, jobId)) !== null);
        // P wrote its reply before it answered that: any reply handed to the worker on that connection from
        // now on comes after it, so the worker heard "completed" and let the run's lock go.
        const seen = t.deliveries(completionOn!);
        await until('the completion reply to reach the worker', () => t.deliveries(completionOn!) > seen);
        const finishOnR = await t.onR.hget(jobKey(jobId), 'leasebeatFinish');
        const completedOnR = await t.onR.zscore(completedKey, jobId);

        await t.p.kill();
        t.replication.heal('reset');
        await t.onR.call('REPLICAOF', 'NO', 'ONE');
        // R has the run in active under the lock of a worker that thinks it finished.
        if (lockExpired) await until("the run's lock to expire on R", async () => (await t.onR.exists(`${jobKey(jobId)}:lock`)) === 0, 10_000);
        t.workerLink.switchTo({ port: t.r.port }, 'reconnect');
        await until('the run to be completed on R', async () => (await t.onR.zscore(completedKey, jobId)) !== null, 30_000);

        assert.equal(runs, 1, 'the handler ran once');
        assert.equal(completedOnR, null, "R never had BullMQ's completion (the failover lost it)");
        assert.ok(finishOnR !== null, "R had the run's own finish record before P died");
        const hash = await t.onR.hgetall(jobKey(jobId));
        assert.equal(hash.leasebeatStarts, '1', 'R counts one start');
        if (lockExpired) assert.equal(hash.stc, '1', 'the run came back through stalled-job recovery');
        else test.diagnostic(hash.stc === undefined ? 'recorded again by the worker still holding the run' : `recorded again after stalled-job recovery (stalled count ${hash.stc})`);
        assert.deepEqual(JSON.parse(hash.returnvalue ?? 'null'), { ran: 1 }, "the run ends completed on R with the handler's return value");
        assert.deepEqual(metrics.seen.notRunAgain, [['finisher', 'finish-lost']]);
        assert.deepEqual(metrics.seen.started, [['finisher', 'first']]);
      } finally {
        await pool.close(1_000);
        await queue.close();
        await t.close();
      }
    });
  }

  it('replication held before the finish is recorded: the worker holds the run (its lock renewed) and completes it once R has the finish; the handler runs once', { timeout: 45_000 }, async () => {
    const t = await failoverTopology();
    const metrics = recordedMetrics();
    const wait = new ReplicaWait(t.worker, { minReplicas: 1, timeoutMs: 300 });
    const pool = workerPool(t.worker, wait, 'worker-1', metrics.hooks);
    const queue = new Queue(QUEUE, { connection: t.onP });
    queue.on('error', () => undefined);
    const jobId = 'holder@1';
    let runs = 0;
    let returnedAt = 0;
    let unconfirmedBefore = 0;
    let lock: string | null = null;
    try {
      pool.update(
        definitions('holder', async () => {
          runs++;
          lock = await t.onP.get(`${jobKey(jobId)}:lock`);
          t.replication.partition('blackhole');
          unconfirmedBefore = wait.stats.unconfirmed;
          returnedAt = performance.now();
          return { ran: runs };
        }),
      );
      await queue.add('holder', tickJobData(), { jobId });
      const activeOnP = async (): Promise<boolean> => (await t.onP.lpos(`bull:${QUEUE}:active`, jobId)) !== null;
      // Four unconfirmed finishes: 4 WAITs of 300 ms and backoffs of 250, 500 and 1000 ms, past the lock's 2 s.
      await until('four unconfirmed finishes (or the run to leave active)', async () => returnedAt > 0 && (wait.stats.unconfirmed - unconfirmedBefore >= 4 || !(await activeOnP())), 20_000);
      assert.ok(await activeOnP(), 'the run is held in active on P while its finish is not on R');
      assert.ok(performance.now() - returnedAt > LOCK_MS, 'for longer than the lock lasts');
      assert.ok(lock !== null);
      assert.equal(await t.onP.get(`${jobKey(jobId)}:lock`), lock, 'its lock is still ours: renewed');
      assert.equal(await t.onP.hget(jobKey(jobId), 'stc'), null, 'no stalled-job recovery touched it');
      assert.equal(await t.onP.zscore(completedKey, jobId), null);
      assert.equal(await t.onR.hget(jobKey(jobId), 'leasebeatFinish'), null, 'R does not have the finish yet');

      t.replication.heal('deliver');
      await until('the run to be completed on R', async () => (await t.onR.zscore(completedKey, jobId)) !== null, 20_000);
      assert.equal(runs, 1, 'the handler ran once');
      const hash = await t.onR.hgetall(jobKey(jobId));
      assert.equal(hash.leasebeatStarts, '1');
      assert.deepEqual(JSON.parse(hash.returnvalue ?? 'null'), { ran: 1 });
      assert.deepEqual(metrics.seen.started, [['holder', 'first']]);
      assert.deepEqual(metrics.seen.notRunAgain, []);
      assert.deepEqual(metrics.seen.finishUnrecorded, []);
    } finally {
      t.replication.heal('deliver');
      await pool.close(1_000);
      await queue.close();
      await t.close();
    }
  });
});

describe('runs put back on one server (no replicas): operator retries and lost runners', () => {
  const redis = useRedis();
  let queue: Queue;
  const closers: Array<() => Promise<void>> = [];

  before(() => {
    queue = new Queue(QUEUE, { connection: redis.client });
  });
  afterEach(async () => {
    // A pool left running would take the next case's runs (and fail them: it does not know their jobs).
    for (const close of closers.splice(0)) await close();
  });
  redis.beforeClose(() => queue.close());

  /** A pool with its own connection, closed after the file. */
  function pool(identity: string, metrics: WorkerMetrics): WorkerPool {
    const connection = redis.server.client();
    const made = workerPool(connection, directWrites(connection), identity, metrics);
    closers.push(async () => {
      await made.close(1_000);
      connection.disconnect();
    });
    return made;
  }

  it("an operator's retry of a completed run is refused: the handler does not run, the run is completed again with its value, its log says why", async () => {
    const metrics = recordedMetrics();
    let runs = 0;
    const workers = pool('worker-1', metrics.hooks);
    workers.update(definitions('once', () => ({ ran: ++runs })));
    const jobId = 'once@1';
    await queue.add('once', tickJobData(), { jobId });
    await until('the run to complete', async () => (await queue.getJob(jobId))?.finishedOn !== undefined);
    const first = (await queue.getJob(jobId))!;
    await first.retry('completed');
    await until('the retried run to be completed again (or run again)', async () => {
      const job = await queue.getJob(jobId);
      return (metrics.seen.notRunAgain.length > 0 || runs > 1) && job?.finishedOn !== undefined && (await job.getState()) === 'completed';
    });
    assert.equal(runs, 1, 'the handler did not run again');
    assert.deepEqual((await queue.getJob(jobId))!.returnvalue, { ran: 1 }, 'completed with the same value');
    const { logs } = await queue.getJobLogs(jobId);
    assert.ok(logs.some((line) => /^leasebeat: a completed run was put back to run .*refused/.test(line)), `the job's log says why: ${JSON.stringify(logs)}`);
    assert.deepEqual(metrics.seen.notRunAgain, [['once', 'completed-retry-refused']]);
    assert.deepEqual(metrics.seen.started, [['once', 'first']]);
  });

  it("an operator's retry of a run that failed for good runs the handler again, counted as operator-retry", async () => {
    const metrics = recordedMetrics();
    let runs = 0;
    const workers = pool('worker-1', metrics.hooks);
    workers.update(
      definitions('flaky', () => {
        if (++runs === 1) throw new Error('the first run fails');
        return 'second';
      }),
    );
    const jobId = 'flaky@1';
    await queue.add('flaky', tickJobData(), { jobId });
    await until('the run to fail', async () => (await queue.getJob(jobId))?.failedReason !== undefined && (await queue.getJob(jobId))?.finishedOn !== undefined);
    await (await queue.getJob(jobId))!.retry('failed');
    await until('the retried run to complete', async () => (await queue.getJob(jobId))?.returnvalue === 'second');
    assert.equal(runs, 2);
    assert.deepEqual(metrics.seen.started, [['flaky', 'first'], ['flaky', 'operator-retry']]);
    assert.deepEqual(metrics.seen.notRunAgain, []);
  });

  it('a run whose worker was abandoned mid-run (close past its timeout) runs again on another pool, counted as runner-lost', { timeout: 30_000 }, async () => {
    const lostMetrics = recordedMetrics();
    const nextMetrics = recordedMetrics();
    const runners: string[] = [];
    let started: () => void = () => undefined;
    const firstStarted = new Promise<void>((resolve) => (started = resolve));
    const handler = (runner: string) => (context: HandlerContext) => {
      runners.push(runner);
      if (runners.length > 1) return 'recovered';
      started();
      // Runs until the pool gives up on it.
      return new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason as Error)));
    };
    const lost = pool('worker-lost', lostMetrics.hooks);
    lost.update(definitions('long', handler('worker-lost')));
    const jobId = 'long@1';
    await queue.add('long', tickJobData(), { jobId });
    await firstStarted;
    await lost.close(100);
    const next = pool('worker-next', nextMetrics.hooks);
    next.update(definitions('long', handler('worker-next')));
    await until('the run to complete on the other pool', async () => (await queue.getJob(jobId))?.returnvalue === 'recovered', 20_000);
    assert.deepEqual(runners, ['worker-lost', 'worker-next']);
    assert.deepEqual(lostMetrics.seen.started, [['long', 'first']]);
    assert.deepEqual(nextMetrics.seen.started, [['long', 'runner-lost']]);
    const hash = await redis.client.hgetall(jobKey(jobId));
    assert.equal(hash.leasebeatStarts, '2');
    assert.match(hash.leasebeatRunner ?? '', /\|worker-next$/);
  });
});
