import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { AdminError, createAdmin } from '../../src/index.js';
import { KeySpace } from '../../src/redis/keys.js';
import { manualJobId, submitTrigger, triggerOutcome, type TriggerOutcome } from '../../src/producing/manual-triggers.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { Producer } from '../../src/producing/producer.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { definitionHash } from '../../src/scheduling/definition-hash.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJobWith } from '../support/scheduled-job.js';
import { producerTerms, term } from '../support/term.js';
import { until } from '../support/until.js';
import { blockedXreads, reconnectingInAMinute, settlesWithin } from '../support/blocked-reads.js';

const logger = pino({ level: 'silent' });
const keys = new KeySpace();
const YEARLY = '0 0 1 1 *';

/** A job that never ticks during a test (once a year): only triggers add its runs. */
const yearly = scheduledJobWith({ schedule: YEARLY, queue: 'manual-test', handler: () => undefined });

describe('manual triggers: taken by the leader under the fence, at most once', () => {
  const redis = useRedis();
  let ledger: TickLedger;
  let queues: QueueSet;
  let jobs: Map<string, ScheduledJob>;

  const { lead, stopAll } = producerTerms(() => ({ redis: redis.client, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger }));
  const outcomeOf = (id: string): Promise<TriggerOutcome> => until(`the outcome of ${id}`, () => triggerOutcome(redis.client, keys, id), 10_000);
  const queueJobs = async (name: string) => {
    const queue = new Queue(name, { connection: redis.client });
    try {
      return await queue.getJobs(['waiting', 'waiting-children', 'delayed', 'active', 'completed', 'failed', 'prioritized']);
    } finally {
      await queue.close();
    }
  };

  redis.beforeClose(async () => {
    await stopAll();
    await queues?.close();
  });
  beforeEach(async () => {
    await stopAll();
    await queues?.close();
    await redis.client.flushall();
    ledger = new TickLedger(redis.client, keys);
    queues = new QueueSet({ connection: redis.client });
    jobs = new Map([['report', yearly({ name: 'report', data: { to: 'ops' } })]]);
  });

  it('one request adds exactly one run, with the id the request names, the term in its data, and not as the previous run', async () => {
    lead(1);
    const request = await submitTrigger(redis.client, keys, 'report', 10_000);
    const outcome = await outcomeOf(request.id);
    const jobId = manualJobId('report', request.id);
    assert.deepEqual(outcome, { jobId, queue: 'manual-test', flow: false });
    const added = await queueJobs('manual-test');
    assert.deepEqual(added.map((job) => job.id), [jobId]);
    assert.deepEqual(added[0]!.data, { tick: request.requestedAt, token: { generation: 'gen-1', leaderTransitions: 1 }, data: { to: 'ops' }, manual: true, definition: definitionHash(jobs.get('report')!) });
    assert.equal(await redis.client.hget(keys.manual('report'), request.id), `enqueued|${jobId}`);
    assert.equal((await ledger.jobState('report')).lastJobId, undefined, 'a trigger does not become the previous run');
  });

  it('the same request read again by a second term adds nothing', async () => {
    const first = lead(1);
    const request = await submitTrigger(redis.client, keys, 'report', 10_000);
    await outcomeOf(request.id);
    first.stop.abort();
    await first.run;
    await queues.get('manual-test').obliterate({ force: true });
    lead(2);
    // A later request is taken by the second term, so it has read past the first one.
    const later = await submitTrigger(redis.client, keys, 'report', 10_000);
    await outcomeOf(later.id);
    assert.deepEqual((await queueJobs('manual-test')).map((job) => job.id), [manualJobId('report', later.id)]);
    assert.equal(await redis.client.llen(keys.triggerResult(request.id)), 1);
  });

  it('a claim an earlier term left unconfirmed is finished by the next term with the same job id, once', async () => {
    assert.deepEqual(await ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 1 }, 'leader-1', Date.now()), { ok: true });
    const request = await submitTrigger(redis.client, keys, 'report', 10_000);
    const jobId = manualJobId('report', request.id);
    // What a leader that died between its claim and its add leaves behind.
    await redis.client.hset(keys.manual('report'), request.id, `claimed|gen-1|1|${jobId}`);
    lead(2);
    assert.deepEqual(await outcomeOf(request.id), { jobId, queue: 'manual-test', flow: false });
    assert.equal(await redis.client.hget(keys.manual('report'), request.id), `enqueued|${jobId}`);
    const added = await queueJobs('manual-test');
    assert.deepEqual(added.map((job) => [job.id, (job.data as { token: { leaderTransitions: number } }).token.leaderTransitions]), [[jobId, 2]]);
  });

  it("a stale term's claim is refused by the fence: the request waits for the current leader", async () => {
    const stale = lead(1);
    await until('the first term to raise the fence', async () => (await ledger.fence()).leaderTransitions === 1);
    assert.deepEqual(await ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 2 }, 'leader-2', Date.now()), { ok: true });
    const request = await submitTrigger(redis.client, keys, 'report', 10_000);
    await stale.run;
    assert.equal(await redis.client.hget(keys.manual('report'), request.id), null);
    assert.ok((await ledger.fence()).fenced >= 1);
    assert.deepEqual(await queueJobs('manual-test'), []);
    lead(2);
    assert.equal((await outcomeOf(request.id)) && (await queueJobs('manual-test')).length, 1);
  });

  it('a request past its deadline is refused and never runs', async () => {
    const request = await submitTrigger(redis.client, keys, 'report', 1);
    await until('Redis time to pass the deadline', async () => Number((await redis.client.time())[0]) * 1000 > request.deadline + 1000, 5_000);
    lead(1);
    assert.deepEqual(await outcomeOf(request.id), { refused: 'expired' });
    assert.equal(await redis.client.hget(keys.manual('report'), request.id), 'refused|expired');
    assert.deepEqual(await queueJobs('manual-test'), []);
  });

  it('a paused job and an unknown job are refused with their reasons', async () => {
    await ledger.pause('report', 'maintenance');
    lead(1);
    const paused = await submitTrigger(redis.client, keys, 'report', 10_000);
    assert.deepEqual(await outcomeOf(paused.id), { refused: 'paused' });
    const unknown = await submitTrigger(redis.client, keys, 'no-such-job', 10_000);
    assert.deepEqual(await outcomeOf(unknown.id), { refused: 'unknown-job' });
    assert.deepEqual(await queueJobs('manual-test'), []);
  });

  it('a flow trigger adds the flow the job defines: the parent waits for its children', async () => {
    jobs.set(
      'fan-out',
      yearly({ name: 'fan-out', handler: undefined, flow: () => ({ name: 'fan-out', children: [{ name: 'part', data: { n: 1 } }, { name: 'part', data: { n: 2 } }] }) }),
    );
    lead(1);
    const request = await submitTrigger(redis.client, keys, 'fan-out', 10_000);
    const outcome = await outcomeOf(request.id);
    const jobId = manualJobId('fan-out', request.id);
    assert.deepEqual(outcome, { jobId, queue: 'manual-test', flow: true });
    const added = await queueJobs('manual-test');
    assert.deepEqual(added.map((job) => job.id).sort(), [jobId, `${jobId}/0`, `${jobId}/1`]);
    assert.equal(await added.find((job) => job.id === jobId)!.getState(), 'waiting-children');
  });

  it('the admin returns the run, refuses a paused job with its own code, and with no leader times out saying it will not run', { timeout: 30_000 }, async () => {
    const admin = createAdmin({ connection: redis.server.url, timeoutMs: 1_500 });
    try {
      await assert.rejects(admin.trigger('report'), (error: unknown) => error instanceof AdminError && error.code === 'timeout' && /will not run/.test(error.message));
      lead(1);
      const result = await admin.trigger('report');
      assert.equal(result.queue, 'manual-test');
      await ledger.pause('report');
      await assert.rejects(admin.trigger('report'), (error: unknown) => error instanceof AdminError && error.code === 'paused');
      // Only the one run the admin reported: the request it gave up on never ran.
      assert.deepEqual((await queueJobs('manual-test')).map((job) => job.id), [result.jobId]);
    } finally {
      await admin.close();
    }
  });
  // The schedule feed's stop hung this way in CI (see test/schedules/feed.test.ts); the desk's blocked
  // XREAD had the same shape: a reader waiting to reconnect when the term ends is disconnected, ioredis
  // drops the reconnect and never settles the read it holds for resending, and the term never ended.
  it('a term ends while the desk’s reader waits to reconnect, its blocked read held for resending', { timeout: 30_000 }, async () => {
    // Reconnects a minute after a lost connection; the desk's reader is a duplicate of it, kept here to watch.
    const slow = reconnectingInAMinute(redis.server.port);
    const duplicates: Redis[] = [];
    const duplicate = slow.duplicate.bind(slow);
    slow.duplicate = (...args: Parameters<Redis['duplicate']>) => {
      const made = duplicate(...args);
      duplicates.push(made);
      return made;
    };
    const stop = new AbortController();
    const run = new Producer({ redis: slow, ledger: new TickLedger(slow, keys), queues, jobs: () => jobs, stillLeading: () => true, logger }).run(term(1), stop.signal);
    try {
      const [reader] = await blockedXreads(redis.client, 'the desk’s blocked XREAD');
      await redis.client.client('KILL', 'ID', reader!);
      await until('the desk’s reader to wait to reconnect', () => duplicates.some((made) => made.status === 'reconnecting'), 10_000);
      stop.abort();
      assert.equal(await settlesWithin(run, 10_000), true, 'the term ended');
    } finally {
      stop.abort();
      slow.disconnect();
    }
  });
});
