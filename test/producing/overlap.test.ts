import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'bullmq';
import { pino } from 'pino';
import { Producer } from '../../src/producing/producer.js';
import type { OverlapPolicy, ScheduledJob } from '../../src/scheduling/define-job.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { RunRecorder } from '../support/run-recorder.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });

const slowJob = (overlap: OverlapPolicy): ScheduledJob => scheduledJob({ name: 'slow', every: '1s', overlap, handler: () => undefined });

/** Runs take 1.5 s on a 1 s schedule, so every other tick meets an unfinished run. */
const RUN_MS = 1_500;

describe('Overlap policies with real workers: runs never overlap and start in tick order', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);

  /**
   * Two workers (two instances) run the job while the given terms produce one after another, each
   * starting `handoverMs` after the previous one while the previous one still runs; returns the runs.
   */
  async function produceWithWorkers(job: ScheduledJob, terms: number, termMs: number): Promise<RunRecorder> {
    const recorder = new RunRecorder();
    const connections = [redis.server.client(), redis.server.client()];
    const workers = connections.map((connection, i) => new Worker('leasebeat', recorder.processor(`worker-${i}`, RUN_MS), { connection, concurrency: 1 }));
    const jobs = new Map([[job.name, job]]);
    const producing: Array<{ stop: AbortController; run: Promise<void> }> = [];
    for (let i = 1; i <= terms; i++) {
      const stop = new AbortController();
      const producer = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger });
      producing.push({ stop, run: producer.run(term(i), stop.signal) });
      await sleep(termMs);
    }
    for (const { stop } of producing) stop.abort();
    await Promise.all(producing.map(({ run }) => run));
    await Promise.all(workers.map((worker) => worker.close()));
    for (const connection of connections) connection.disconnect();
    return recorder;
  }

  it('bufferOne across a handover: the next term keeps the buffered tick until the run before it finished', { timeout: 30_000 }, async () => {
    const job = slowJob('bufferOne');
    const jobs = new Map([[job.name, job]]);
    const producer = (): Producer => new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger });
    const first = new AbortController();
    const run1 = producer().run(term(1), first.signal);
    // No worker yet: the first run stays waiting and the next tick is buffered behind it.
    const [running, buffered] = await until('a buffered tick', async () => {
      const pending = await base.ledger.pendingTicks(job.name);
      const states = await Promise.all(pending.map((tick) => base.ledger.tickState(job.name, tick)));
      const index = states.findIndex((state) => state?.startsWith('buffered|'));
      const previous = Number((await base.ledger.jobState(job.name)).lastJobTick);
      return index >= 0 && [previous, pending[index]!];
    }, 10_000);
    first.abort();
    await run1;
    const second = new AbortController();
    const run2 = producer().run(term(2), second.signal);
    await until('the second term to tick', async () => ((await base.ledger.jobState(job.name)).lastScheduledTick ?? 0) > buffered + 1000, 10_000);
    assert.match((await base.ledger.tickState(job.name, buffered)) ?? '', /^buffered\|/, 'still buffered behind a waiting run');
    assert.equal(await base.queues.get('leasebeat').getJob(`slow@${buffered}`), undefined);
    const connection = redis.server.client();
    const worker = new Worker('leasebeat', () => sleep(100), { connection });
    await until('the buffered tick to be added', async () => (await base.ledger.tickState(job.name, buffered))?.startsWith('enqueued|'), 10_000);
    second.abort();
    await run2;
    const previousRun = await base.queues.get('leasebeat').getJob(`slow@${running}`);
    const releasedRun = await base.queues.get('leasebeat').getJob(`slow@${buffered}`);
    assert.ok(previousRun?.finishedOn && releasedRun, 'both ran');
    assert.ok(releasedRun.timestamp >= previousRun.finishedOn, 'added only after the run before it finished');
    await worker.close();
    connection.disconnect();
  });

  it('bufferAll: up to bufferMax ticks wait behind a run, the rest are skipped, and a new term runs the waiting ones one by one in tick order', { timeout: 40_000 }, async () => {
    const job = scheduledJob({ name: 'slow', every: '1s', overlap: 'bufferAll', bufferMax: 3, handler: () => undefined });
    const jobs = new Map([[job.name, job]]);
    const producer = (): Producer => new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger });
    const statesOf = async (): Promise<Array<[number, string]>> => {
      const ticks = (await redis.client.zrange(base.ledger.keys.ledgerIndex(job.name), 0, -1)).map(Number);
      return Promise.all(ticks.map(async (tick) => [tick, (await base.ledger.tickState(job.name, tick)) ?? ''] as [number, string]));
    };
    const first = new AbortController();
    const run1 = producer().run(term(1), first.signal);
    // No worker yet: the first run stays waiting, three ticks are buffered behind it, the next is skipped.
    await until('a tick skipped past the bound', async () => (await statesOf()).some(([, state]) => state === 'skipped|overlap'), 15_000);
    first.abort();
    await run1;
    const states = await statesOf();
    assert.match(states[0]![1], /^enqueued\|/);
    assert.deepEqual(states.slice(1, 4).map(([, state]) => state.split('|')[0]), ['buffered', 'buffered', 'buffered']);
    for (const [, state] of states.slice(4)) assert.equal(state, 'skipped|overlap');
    const buffered = states.slice(1, 4).map(([tick]) => tick);

    const second = new AbortController();
    const run2 = producer().run(term(2), second.signal);
    await until('the second term to tick', async () => ((await base.ledger.jobState(job.name)).lastScheduledTick ?? 0) > states.at(-1)![0] + 1000, 10_000);
    for (const tick of buffered) assert.match((await base.ledger.tickState(job.name, tick)) ?? '', /^buffered\|/, 'still buffered behind a waiting run');
    const recorder = new RunRecorder();
    const connection = redis.server.client();
    const worker = new Worker('leasebeat', recorder.processor('worker', 300), { connection });
    await until('every buffered tick to have run', () => buffered.every((tick) => recorder.runs.some((run) => run.tick === tick && run.end !== undefined)), 20_000);
    second.abort();
    await run2;
    await worker.close();
    connection.disconnect();
    const ran = recorder.runs.map((run) => run.tick);
    assert.deepEqual(ran.slice(0, 4), [states[0]![0], ...buffered], 'the waiting run, then the buffered ticks in tick order');
    assert.deepEqual(ran, [...new Set(ran)].sort((a, b) => a - b), 'none ran twice, all in tick order');
    assert.deepEqual(recorder.overlaps(), [], 'no two runs at once');
  });

  for (const policy of ['bufferOne', 'bufferAll', 'skip'] as const) {
    for (const terms of [1, 2]) {
      it(`${policy}, ${terms} term${terms > 1 ? 's (the second raised while the first still produces)' : ''}`, { timeout: 40_000 }, async () => {
        const recorder = await produceWithWorkers(slowJob(policy), terms, 5_000 / terms + 500);
        assert.ok(recorder.runs.length >= 3, `only ${recorder.runs.length} runs`);
        assert.deepEqual(recorder.overlaps(), [], 'no two runs at once');
        const order = recorder.startOrder();
        assert.deepEqual(order, [...order].sort((a, b) => a - b), 'runs start in tick order');
        // A buffered tick runs once its predecessor finished, well after its own time; skip runs on time.
        const late = recorder.runs.filter((run) => run.start - run.tick >= 400);
        if (policy !== 'skip') assert.ok(late.length >= 1, 'a buffered tick ran after its predecessor');
        else assert.deepEqual(late, [], 'skip never delays a tick');
      });
    }
  }
});
