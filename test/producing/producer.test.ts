import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, Worker } from 'bullmq';
import { pino } from 'pino';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { definitionHash } from '../../src/scheduling/definition-hash.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { ProducerMetrics } from '../../src/producing/lane-term.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick } from '../../src/scheduling/plan.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { silentGaps, ticksBetween } from '../support/ledger-audit.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { startRedis, useRedis } from '../support/redis-server.js';
import { scheduledJobWith } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });

const scheduled = scheduledJobWith({ every: '1s', handler: () => undefined });

class CountingMetrics implements ProducerMetrics {
  enqueuedTotal = 0;
  fencedTotal = 0;
  skips: Array<{ reason: string; count: number }> = [];
  enqueued(): void {
    this.enqueuedTotal++;
  }
  skipped(_job: string, reason: string, count: number): void {
    this.skips.push({ reason, count });
  }
  fenced(count: number): void {
    this.fencedTotal += count;
  }
}

describe('Producer on a real Redis and BullMQ', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);
  let jobs: Map<string, ScheduledJob>;

  const producer = (options: { stillLeading?: () => boolean; metrics?: ProducerMetrics; onTakenOver?: () => void } = {}): Producer =>
    new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: options.stillLeading ?? (() => true), logger, metrics: options.metrics, onTakenOver: options.onTakenOver });

  beforeEach(() => {
    jobs = new Map();
  });

  const queueJobs = async (name = 'leasebeat') => {
    const queue = new Queue(name, { connection: redis.client });
    try {
      return await queue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed', 'prioritized']);
    } finally {
      await queue.close();
    }
  };

  it("enqueues each tick once, on time, with a deterministic id, the term and the definition's hash in its data", async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    const metrics = new CountingMetrics();
    const stop = new AbortController();
    const run = producer({ metrics }).run(term(1), stop.signal);
    await sleep(3_400);
    stop.abort();
    await run;
    const added = await queueJobs();
    assert.ok(added.length >= 3 && added.length <= 4, `expected 3-4 ticks in 3.4 s, got ${added.length}`);
    for (const job of added) {
      const data = job.data as TickJobData;
      assert.equal(job.id, `fast@${data.tick}`);
      assert.equal(data.tick % 1000, 0, 'every ticks are aligned to the epoch');
      assert.equal(data.token.leaderTransitions, 1);
      assert.equal(data.definition, definitionHash(jobs.get('fast')!), 'stamped with the content hash of the definition that decided it');
      // Never before its tick (the producer's clock is Redis' time, this process' within a few ms); how
      // soon after is the benchmark's to measure, not a test's on a loaded machine.
      assert.ok(job.timestamp >= data.tick - 5, `enqueued ${data.tick - job.timestamp} ms before its tick`);
    }
    assert.equal(metrics.enqueuedTotal, added.length);
    assert.equal((await base.ledger.jobState('fast')).enqueued, added.length);
  });

  it("a step of the leader's wall clock moves no tick: an hour forward claims nothing early, an hour back holds nothing back", { timeout: 30_000 }, async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    let stepMs = 0;
    const stepped: Clock = { ...systemClock, now: () => Date.now() + stepMs };
    const stop = new AbortController();
    const run = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, clock: stepped }).run(term(1), stop.signal);
    const enqueued = async (): Promise<number> => (await base.ledger.jobState('fast')).enqueued;
    const onTime = async (what: string): Promise<void> => {
      const before = await enqueued();
      await until(`two more ticks ${what}`, async () => (await enqueued()) >= before + 2, 10_000);
      const { lastScheduledTick } = await base.ledger.jobState('fast');
      // Redis' clock is this machine's: the newest tick recorded is due by now, not an hour away.
      assert.ok(lastScheduledTick! <= Date.now(), `${what}: claimed ${new Date(lastScheduledTick!).toISOString()} at ${new Date().toISOString()}`);
    };
    try {
      await onTime('at the start');
      stepMs = 3_600_000;
      await onTime('after a step forward');
      stepMs = -3_600_000;
      await onTime('after a step back');
    } finally {
      stop.abort();
      await run;
    }
    const added = await queueJobs();
    // Held back by an hour's step back it would be an hour late: a bound far from both a step and a loaded machine.
    for (const job of added) assert.ok(job.timestamp - (job.data as TickJobData).tick < 60_000, `${job.id} enqueued ${job.timestamp - (job.data as TickJobData).tick} ms after its tick`);
    const ticks = added.map((job) => (job.data as TickJobData).tick).sort((a, b) => a - b);
    assert.deepEqual(await silentGaps(base.ledger, 'fast', ticksBetween(ticks[0]!, ticks.at(-1)!, 1000)), []);
  });

  it('fencing: a stale leader that does not know it lost is rejected by Redis and stops', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    const staleMetrics = new CountingMetrics();
    const staleStop = new AbortController();
    // The stale leader's local self-fence is blind (it believes it still leads): only Redis can stop it.
    const staleRun = producer({ metrics: staleMetrics }).run(term(1), staleStop.signal);
    await sleep(2_200);
    const freshStop = new AbortController();
    const freshRun = producer().run(term(2), freshStop.signal);
    await staleRun; // ends by itself once a claim is fenced
    const raisedAt = Number(await redis.client.hget(base.ledger.keys.fence, 'raisedAt'));
    await sleep(2_200);
    freshStop.abort();
    await freshRun;

    const added = await queueJobs();
    const stale = added.filter((job) => (job.data as { token: { leaderTransitions: number } }).token.leaderTransitions === 1);
    const fresh = added.filter((job) => (job.data as { token: { leaderTransitions: number } }).token.leaderTransitions === 2);
    assert.ok(stale.length >= 1 && fresh.length >= 1);
    for (const job of stale) assert.ok(job.timestamp <= raisedAt + 5, 'no enqueue from the old term after the fence rose');
    const ids = added.map((job) => job.id);
    assert.equal(new Set(ids).size, ids.length, 'no duplicate ticks');
    assert.ok(staleMetrics.fencedTotal >= 1, 'the stale leader counted its rejection');
    assert.ok((await base.ledger.fence()).fenced >= 1, 'the fence counter records the rejected attempt');
    assert.ok(staleStop.signal.aborted === false, 'it stopped because of the fence, not because it was told to');
  });

  it('the self-fence pauses enqueues before any request, and a late renewal resumes them in order', { timeout: 30_000 }, async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    let leading = true;
    let ended = false;
    /** Self-fence checks answered `false`: the lane's and the enqueue path's few, then the pause's poll every 100 ms. */
    let deniedChecks = 0;
    const stop = new AbortController();
    const stillLeading = (): boolean => {
      if (!leading) deniedChecks++;
      return leading;
    };
    const run = producer({ stillLeading })
      .run(term(1), stop.signal)
      .finally(() => (ended = true));
    await until('a first enqueue', async () => (await base.ledger.jobState('fast')).enqueued >= 1, 10_000);
    leading = false;
    const pausedAt = Date.now();
    // A claim or add already past its self-fence check may still land. A lane's step asks at most five
    // times before it parks; past that the asking is the pause's poll (every 100 ms), so the lane is
    // parked and nothing of it is on the wire.
    await until('the producer to park on the self-fence', () => deniedChecks >= 10, 10_000);
    const atLoss = await base.ledger.jobState('fast');
    await sleep(2_200 - (Date.now() - pausedAt)); // two ticks come due while paused
    assert.deepEqual(await base.ledger.jobState('fast'), atLoss, 'no claim and no add while self-fenced');
    assert.equal((await base.ledger.fence()).fenced, 0, 'nothing even reached the fence');
    assert.equal(ended, false, 'a late renewal does not end the term');
    leading = true;
    const resumedAt = Date.now();
    // Stop once every tick owed up to the resume second is recorded as added: not at its claim, which
    // may come just before its add and confirm.
    const first = atLoss.lastScheduledTick!;
    const last = await until('the owed ticks, each added', async () => {
      const { lastScheduledTick } = await base.ledger.jobState('fast');
      if ((lastScheduledTick ?? 0) < Math.floor(resumedAt / 1000) * 1000) return undefined;
      const states = await Promise.all(ticksBetween(first, lastScheduledTick!, 1000).map((tick) => base.ledger.tickState('fast', tick)));
      return states.every((state) => state?.startsWith('enqueued|')) && lastScheduledTick;
    }, 10_000);
    stop.abort();
    await run;
    const owed = ticksBetween(first, last, 1000);
    assert.ok(owed.length >= 3, `owed ${owed.length} ticks`);
    for (const tick of owed) assert.equal(await base.ledger.tickState('fast', tick), `enqueued|fast@${tick}`, `tick ${new Date(tick).toISOString()}`);
    const enqueuedAt = (await queueJobs()).filter((job) => owed.includes((job.data as { tick: number }).tick));
    enqueuedAt.sort((a, b) => a.timestamp - b.timestamp);
    assert.deepEqual(enqueuedAt.map((job) => job.id), owed.map((tick) => `fast@${tick}`), 'owed ticks were added in tick order');
  });

  it('a raise refused by the fence tells the scheduler this leader cannot produce', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    await base.ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 5 }, 'newer', Date.now());
    const calls: string[] = [];
    const stop = new AbortController();
    const p = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, onCannotProduce: (reason) => calls.push(reason) });
    await Promise.race([p.run(term(4), stop.signal), sleep(5_000).then(() => assert.fail('the run did not end by itself'))]);
    assert.deepEqual(calls, ['fence-refused']);
    assert.equal((await base.ledger.jobState('fast')).lastScheduledTick, undefined, 'nothing was claimed');
    // The same token under another holder is refused too: one token, one term.
    const sameToken = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, onCannotProduce: (reason) => calls.push(reason) });
    await sameToken.run({ ...term(5), holderIdentity: 'another' }, stop.signal);
    assert.deepEqual(calls, ['fence-refused', 'fence-refused']);
  });

  it('finishes a tick that a crashed leader claimed but never added, exactly once', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    await base.ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 1 }, 'crashed', Date.now());
    const orphan = Math.floor(Date.now() / 1000) * 1000 - 1000;
    await base.ledger.claim({ generation: 'gen-1', leaderTransitions: 1 }, 'fast', orphan, `fast@${orphan}`);
    const stop = new AbortController();
    const run = producer().run(term(2), stop.signal);
    await sleep(300);
    stop.abort();
    await run;
    const queue = new Queue('leasebeat', { connection: redis.client });
    const job = await queue.getJob(`fast@${orphan}`);
    await queue.close();
    assert.ok(job, 'the orphaned claim was enqueued by the next term');
    assert.equal(await base.ledger.tickState('fast', orphan), `enqueued|fast@${orphan}`);
    assert.deepEqual(await base.ledger.pendingTicks('fast'), []);
  });

  it('never enqueues a tick twice, even after removeOnComplete deleted its job', async () => {
    jobs.set('fast', scheduled({ name: 'fast', removeOnComplete: true }));
    const workerConnection = redis.server.client();
    const worker = new Worker('leasebeat', () => Promise.resolve('done'), { connection: workerConnection });
    const first = new AbortController();
    const run1 = producer().run(term(1), first.signal);
    await sleep(2_200);
    first.abort();
    await run1;
    await sleep(300);
    const done = Number((await redis.client.hget(base.ledger.keys.jobState('fast'), 'enqueued')) ?? 0);
    assert.ok(done >= 2);
    assert.equal((await queueJobs()).length, 0, 'completed jobs were removed');
    // A new term replays the same ticks (as after a failover): the ledger refuses every one of them.
    const last = Number(await redis.client.hget(base.ledger.keys.jobState('fast'), 'lastScheduledTick'));
    await redis.client.hset(base.ledger.keys.jobState('fast'), 'lastScheduledTick', String(last - 3_000));
    const second = new AbortController();
    const run2 = producer().run(term(2), second.signal);
    await sleep(200);
    second.abort();
    await run2;
    await worker.close();
    workerConnection.disconnect();
    const runs = await redis.client.zcard('bull:leasebeat:completed');
    assert.equal(runs, 0);
    const enqueuedAfter = Number(await redis.client.hget(base.ledger.keys.jobState('fast'), 'enqueued'));
    assert.ok(enqueuedAfter - done <= 1, `the replayed ticks were not enqueued again (${enqueuedAfter - done} new)`);
  });

  it('catch-up on takeover: latest enqueues the newest missed tick and records the rest as skipped', async () => {
    jobs.set('fast', scheduled({ name: 'fast', catchup: { window: '5s', mode: 'latest' } }));
    await base.ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 1 }, 'old', Date.now());
    const now = Date.now();
    await redis.client.hset(base.ledger.keys.jobState('fast'), 'lastScheduledTick', String(Math.floor(now / 1000) * 1000 - 20_000));
    const metrics = new CountingMetrics();
    const stop = new AbortController();
    let takenOver: () => void = () => undefined;
    const tookOver = new Promise<void>((resolve) => (takenOver = resolve));
    const run = producer({ metrics, onTakenOver: () => takenOver() }).run(term(2), stop.signal);
    await tookOver;
    stop.abort();
    await run;
    const reasons = Object.fromEntries(metrics.skips.map((s) => [s.reason, s.count]));
    assert.ok(reasons['missed-window']! >= 14, JSON.stringify(reasons));
    assert.ok(reasons['catchup-limit']! >= 4, JSON.stringify(reasons));
    const ranges = await base.ledger.skippedRanges('fast');
    assert.deepEqual(ranges.map((r) => r.reason).sort(), ['catchup-limit', 'missed-window']);
    // The newest missed tick follows the skipped ones; a tick due after the takeover planned (on a loaded
    // machine, before the abort) is a regular run, not caught up.
    const newestMissed = Math.max(...ranges.map((r) => r.to)) + 1000;
    const caughtUp = (await queueJobs()).map((job) => (job.data as TickJobData).tick).filter((tick) => tick <= newestMissed);
    assert.deepEqual(caughtUp, [newestMissed], 'only the newest missed tick ran');
  });

  it('overlap skip: a tick is skipped while the previous run is still unfinished', async () => {
    jobs.set('slow', scheduled({ name: 'slow', overlap: 'skip' }));
    const metrics = new CountingMetrics();
    const stop = new AbortController();
    const run = producer({ metrics }).run(term(1), stop.signal);
    await sleep(2_300); // no worker: the first run stays waiting
    stop.abort();
    await run;
    assert.equal((await queueJobs()).length, 1);
    assert.ok(metrics.skips.filter((s) => s.reason === 'overlap').length >= 1);
    assert.ok(((await base.ledger.jobState('slow')).skipped.overlap ?? 0) >= 1);
  });

  it('a job paused at run time has its ticks recorded as skipped (paused)', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    await base.ledger.pause('fast', 'maintenance');
    const stop = new AbortController();
    const run = producer().run(term(1), stop.signal);
    await sleep(2_200);
    stop.abort();
    await run;
    assert.equal((await queueJobs()).length, 0);
    assert.ok(((await base.ledger.jobState('fast')).skipped.paused ?? 0) >= 2);
  });

  it('catch-up on takeover of a job paused at run time while no leader ran records every missed tick as paused', async () => {
    jobs.set('fast', scheduled({ name: 'fast', catchup: { window: '1m', mode: 'latest' } }));
    await base.ledger.raiseFence({ generation: 'gen-1', leaderTransitions: 1 }, 'old', Date.now());
    const watermark = Math.floor(Date.now() / 1000) * 1000 - 9_000;
    await redis.client.hset(base.ledger.keys.jobState('fast'), 'lastScheduledTick', String(watermark));
    await base.ledger.pause('fast', 'paused while every instance was down');
    const stop = new AbortController();
    const run = producer().run(term(2), stop.signal);
    // The takeover records at least the 9 missed ticks (a 10th may come due meanwhile, also paused).
    await until('the missed ticks recorded', async () => ((await base.ledger.jobState('fast')).lastScheduledTick ?? 0) >= watermark + 9_000, 10_000);
    stop.abort();
    await run;
    const state = await base.ledger.jobState('fast');
    assert.deepEqual(Object.keys(state.skipped), ['paused'], JSON.stringify(state.skipped));
    assert.ok(state.skipped.paused! >= 9, JSON.stringify(state.skipped));
    assert.deepEqual(
      (await base.ledger.skippedRanges('fast')).map((r) => r.reason),
      ['paused'],
    );
    assert.equal((await queueJobs()).length, 0);
  });

  it('a failover just before a job\'s very first tick does not lose that tick', { timeout: 20_000 }, async () => {
    const job = scheduled({ name: 'every-3s', every: '3s' });
    jobs.set(job.name, job);
    let first = nextTick(job, Date.now())!;
    if (first - Date.now() < 1000) first = nextTick(job, first)!;
    const crashed = new AbortController();
    const run = producer().run(term(0), crashed.signal);
    await sleep(first - 100 - Date.now());
    crashed.abort(); // the first term ends before the tick, having claimed nothing
    await run;
    await sleep(first + 500 - Date.now());
    const next = new AbortController();
    const running = producer().run(term(1), next.signal);
    await sleep(300);
    next.abort();
    await running;
    assert.equal(await base.ledger.tickState(job.name, first), `enqueued|every-3s@${first}`);
  });

  it('bufferOne: a buffered tick is claimed at once, so it survives the end of the term', { timeout: 20_000 }, async () => {
    jobs.set('buffered', scheduled({ name: 'buffered', overlap: 'bufferOne' }));
    const stop = new AbortController();
    const run = producer().run(term(1), stop.signal);
    await sleep(2_300); // no worker: the first run stays waiting, the second is buffered, the third skipped
    stop.abort();
    await run;
    const ticks = (await redis.client.zrange(base.ledger.keys.ledgerIndex('buffered'), 0, -1)).map(Number);
    const states = await Promise.all(ticks.map((tick) => base.ledger.tickState('buffered', tick)));
    assert.match(states[0] ?? '', /^enqueued\|/);
    assert.match(states[1] ?? '', /^buffered\|/);
    assert.deepEqual(await base.ledger.pendingTicks('buffered'), [ticks[1]], 'the next leader will finish it');
    for (const state of states.slice(2)) assert.equal(state, 'skipped|overlap');
  });

  it("a flow job's tick adds the flow under the tick's job id, children on the job's queue unless they name one", async () => {
    const flow = ({ tick }: { tick: Date }) => ({
      name: 'fan',
      data: { at: tick.getTime() },
      children: [
        { name: 'shard', data: { shard: 0 } },
        { name: 'shard', queueName: 'other', data: { shard: 1 } },
      ],
    });
    jobs.set('fan', scheduled({ name: 'fan', flow }));
    const stop = new AbortController();
    const run = producer().run(term(1), stop.signal);
    try {
      await until('a tick of the flow job', async () => (await base.ledger.jobState('fan')).enqueued >= 1, 10_000);
    } finally {
      stop.abort();
      await run;
    }
    const { lastJobTick } = await base.ledger.jobState('fan');
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const parent = await queue.getJob(`fan@${lastJobTick}`);
      assert.equal(await parent?.getState(), 'waiting-children');
      const data = parent?.data as TickJobData & { flow: unknown };
      assert.deepEqual([data.tick, data.manual, data.flow], [lastJobTick, false, { at: lastJobTick }]);
    } finally {
      await queue.close();
    }
    const shards = (jobs: Awaited<ReturnType<typeof queueJobs>>): unknown[] => jobs.filter((job) => job.name === 'shard').map((job) => job.data as unknown);
    assert.deepEqual(shards(await queueJobs()), [{ shard: 0 }]);
    assert.deepEqual(shards(await queueJobs('other')), [{ shard: 1 }]);
  });

  it('one job that cannot be added holds back only its own later ticks, in order; other jobs tick on time', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    let broken = true;
    const flow = (): { name: string; data: unknown } => {
      if (broken) throw new Error('flow builder failed');
      return { name: 'broken', data: {} };
    };
    jobs.set('broken', scheduled({ name: 'broken', flow }));
    const stop = new AbortController();
    const run = producer().run(term(1), stop.signal);
    await sleep(2_300);
    const stuck = await base.ledger.pendingTicks('broken');
    assert.equal(stuck.length, 1, 'one claimed tick waits for its add; no later tick is claimed past it');
    assert.equal((await base.ledger.jobState('broken')).lastScheduledTick, stuck[0]);
    const fast = (await queueJobs()).filter((job) => job.name === 'fast');
    assert.ok(fast.length >= 2, `the other job enqueued ${fast.length} ticks`);
    // Not held back by the stuck lane: every tick of the other job since its first ran, in order.
    const fastTicks = fast.map((job) => (job.data as { tick: number }).tick).sort((a, b) => a - b);
    assert.deepEqual(fastTicks, fastTicks.map((_, i) => fastTicks[0]! + i * 1000), 'the other job ran each of its ticks');
    broken = false;
    await until('the held-back ticks of the broken job', async () => (await base.ledger.jobState('broken')).enqueued >= 2, 10_000);
    stop.abort();
    await run;
    const ticks = (await redis.client.zrange(base.ledger.keys.ledgerIndex('broken'), 0, -1)).map(Number);
    assert.deepEqual(await silentGaps(base.ledger, 'broken', ticksBetween(ticks[0]!, ticks.at(-1)!, 1000)), []);
  });

  it('hot reload: a job added while producing starts ticking without a restart', async () => {
    jobs.set('fast', scheduled({ name: 'fast' }));
    const stop = new AbortController();
    const p = producer();
    const run = p.run(term(1), stop.signal);
    await sleep(300);
    jobs = new Map(jobs).set('late', scheduled({ name: 'late', every: '1s' }));
    p.reload();
    await sleep(2_300);
    stop.abort();
    await run;
    assert.ok((await base.ledger.jobState('late')).enqueued >= 2);
  });
});

describe('Producer across a Redis restart', () => {
  it('keeps producing after Redis comes back, and every tick has a job or a recorded skip', { timeout: 60_000 }, async () => {
    const server = await startRedis({ appendonly: true });
    const redis = server.client();
    redis.on('error', () => undefined);
    const ledger = new TickLedger(redis, new KeySpace());
    const queues = new QueueSet({ connection: redis });
    try {
      const jobs = new Map([['fast', scheduled({ name: 'fast', catchup: { window: '1m', mode: 'all', max: 100 } })]]);
      const producer = new Producer({ redis, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger });
      const stop = new AbortController();
      const run = producer.run(term(1), stop.signal);
      await sleep(2_200);
      const downAt = Date.now();
      await server.stop(true);
      await sleep(2_500);
      await server.restart();
      const back = Date.now();
      await until('an enqueue of a tick due after Redis came back', async () => {
        const ticks = (await redis.zrange(ledger.keys.ledgerIndex('fast'), 0, -1)).map(Number);
        const states = await Promise.all(ticks.filter((tick) => tick > back).map((tick) => ledger.tickState('fast', tick)));
        return states.some((state) => state?.startsWith('enqueued|'));
      }, 20_000);
      stop.abort();
      await run;
      const ticks = (await redis.zrange(ledger.keys.ledgerIndex('fast'), 0, -1)).map(Number);
      const [first, last] = [ticks[0]!, ticks.at(-1)!];
      assert.ok(first < downAt - 1_000 && last > back, `ticks from ${first} to ${last} cover the outage (${downAt} to ${back})`);
      // A claim the term made just before it ended stays pending: the next leader adds it.
      assert.deepEqual(await silentGaps(ledger, 'fast', ticksBetween(first, last, 1000)), [], 'every tick through the outage was enqueued late or recorded');
    } finally {
      await queues.close();
      redis.disconnect();
      await server.close();
    }
  });
});
