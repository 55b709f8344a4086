import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, Worker, type Job } from 'bullmq';
import { pino } from 'pino';
import { tickJobId, type TickJobData } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger, type UnstageReason } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { directWrites, type WritePath } from '../../src/redis/durability.js';
import { useRedis } from '../support/redis-server.js';
import { stagedRunsHeldBy, testWorkerPool } from '../support/worker-pool.js';
import { addsFailingWhile, lateStagedAdd, writesThrough } from '../support/write-paths.js';
import { scheduledJobWith } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: process.env.TEST_LOG ?? 'silent' });
const QUEUE = 'leasebeat';
/** Ticks every 3 s, staged 2.5 s ahead: most of the time one run of each job is staged. */
const EVERY = '3s';
const STAGE_AHEAD_MS = 2_500;
/** A staged run the tests act on has at least this long left before its due time (room for a loaded machine). */
const ROOM_MS = 1_200;
/** The fencing token `lead(1)` produces under (see test/support/term.ts). */
const TERM_1 = { generation: 'gen-1', leaderTransitions: 1 };

const job = scheduledJobWith({ every: EVERY, handler: () => undefined });

describe('Pre-staging: ticks added to BullMQ as delayed jobs ahead of their due time', () => {
  const redis = useRedis({ flush: true });
  let ledger: TickLedger;
  let queues: QueueSet;
  let queue: Queue;
  let jobs: Map<string, ScheduledJob>;
  const running: Array<{ stop: AbortController; run: Promise<void> }> = [];
  const workers: Worker[] = [];

  beforeEach(() => {
    ledger = new TickLedger(redis.client, new KeySpace());
    queues = new QueueSet({ connection: redis.client });
    queue = new Queue(QUEUE, { connection: redis.client });
    jobs = new Map();
  });
  afterEach(async () => {
    for (const { stop } of running) stop.abort();
    await Promise.all(running.splice(0).map(({ run }) => run));
    await Promise.all(workers.splice(0).map((worker) => worker.close(true)));
    await queue.close();
    await queues.close();
  });

  /** Leads for one term (`transitions`) with staging on, until the returned stop. */
  const lead = (
    transitions: number,
    { stageAheadMs = STAGE_AHEAD_MS, log = logger, writes }: { stageAheadMs?: number; log?: typeof logger; writes?: WritePath } = {},
  ): { producer: Producer; stop: () => Promise<void> } => {
    const producer = new Producer({ redis: redis.client, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger: log, stageAheadMs, ...(writes && { writes }) });
    const entry = { stop: new AbortController(), run: Promise.resolve() };
    entry.run = producer.run(term(transitions), entry.stop.signal);
    running.push(entry);
    return {
      producer,
      stop: async () => {
        entry.stop.abort();
        await entry.run;
      },
    };
  };

  /** Processes the queue, recording each run's tick and start time. */
  const work = (): Array<{ tick: number; startedAt: number; id: string }> => {
    const runs: Array<{ tick: number; startedAt: number; id: string }> = [];
    const record = (run: Job<TickJobData>): Promise<void> => {
      runs.push({ tick: run.data.tick, startedAt: Date.now(), id: run.id! });
      return Promise.resolve();
    };
    const worker = new Worker(QUEUE, record, {
      connection: redis.client.duplicate({ maxRetriesPerRequest: null }),
      concurrency: 10,
    });
    workers.push(worker);
    return runs;
  };

  /** A run of `name` staged in BullMQ's delayed set with at least {@link ROOM_MS} before its tick. */
  const stagedRun = (name: string): Promise<Job<TickJobData>> =>
    until(`a staged run of ${name} with ${ROOM_MS} ms to go`, async () => {
      const delayed = (await queue.getJobs(['delayed'])) as Array<Job<TickJobData>>;
      return delayed.find((run) => run.name === name && run.data.tick - Date.now() >= ROOM_MS);
    }, 10_000);

  const state = (name: string, tick: number): Promise<string | undefined> => ledger.tickState(name, tick);
  /** The tick's state once its claim is no longer awaiting its confirm. */
  const decided = (name: string, tick: number): Promise<string> =>
    until(`${name}@${tick} to be decided`, async () => {
      const now = await state(name, tick);
      return now?.startsWith('claimed|') ? undefined : now;
    }, 10_000);

  /** Stages a run of `name` under term 1, then ends term 1 (a leader that died or handed over). */
  const stagedByEndedTerm = async (name: string): Promise<Job<TickJobData>> => {
    const first = lead(1);
    const staged = await stagedRun(name);
    await first.stop();
    return staged;
  };

  /** Term 1 (its token, now perhaps stale) marks a take-back of `run`, as a leader that died right after would have. */
  const markedByTerm1 = (name: string, run: Job<TickJobData>, reason: UnstageReason = 'paused'): Promise<'marked' | 'settled' | 'fenced' | 'changed'> =>
    ledger.markUnstaging(TERM_1, name, run.data.tick, run.id!, reason, QUEUE);

  it('adds each tick as a delayed job before it is due; BullMQ starts it at the tick, once', { timeout: 30_000 }, async () => {
    jobs.set('steady', job({ name: 'steady' }));
    const runs = work();
    const leader = lead(1);
    const staged = await stagedRun('steady');
    const tick = staged.data.tick;
    assert.equal(staged.id, `steady@${tick}`);
    assert.equal(staged.timestamp + staged.opts.delay!, tick, 'the delayed score is the tick on the authoritative clock');
    // The add lands before its claim's confirm (claim, add, confirm): wait for the confirm, not the add.
    assert.equal(await decided('steady', tick), `enqueued|steady@${tick}`, 'claimed under the fence, then confirmed');
    await until('the staged run to start', () => runs.find((run) => run.tick === tick), 10_000);
    await until('two more ticks', () => runs.filter((run) => run.tick > tick).length >= 2, 10_000);
    await leader.stop();
    for (const run of runs) {
      assert.ok(run.startedAt >= run.tick - 50, `tick ${run.tick} started ${run.tick - run.startedAt} ms early`);
      assert.ok(run.startedAt - run.tick < 1_500, `tick ${run.tick} started ${run.startedAt - run.tick} ms late`);
    }
    const ids = runs.map((run) => run.id);
    assert.equal(new Set(ids).size, ids.length, 'no tick ran twice');
  });

  it('does not stage jobs whose overlap policy needs the previous run at the tick, flows, or paused definitions', { timeout: 30_000 }, async () => {
    const names = ['skips', 'buffers', 'flows', 'allows'];
    jobs.set('skips', job({ name: 'skips', every: '1s', overlap: 'skip' }));
    jobs.set('buffers', job({ name: 'buffers', every: '1s', overlap: 'bufferOne' }));
    jobs.set('flows', job({ name: 'flows', every: '1s', handler: undefined, flow: () => ({ name: 'flows', children: [{ name: 'child' }] }) }));
    jobs.set('allows', job({ name: 'allows', every: '1s' }));
    jobs.set('paused', job({ name: 'paused', every: '1s', paused: true }));
    work();
    const leader = lead(1);
    const states = ['completed', 'active', 'waiting', 'delayed', 'waiting-children'] as const;
    await until('three ticks of each job', async () => {
      const all = await queue.getJobs([...states]);
      return names.every((name) => all.filter((run) => run.name === name).length >= 3);
    }, 10_000);
    await leader.stop();
    const stoppedAt = Date.now();
    const all = (await queue.getJobs([...states])) as Array<Job<TickJobData>>;
    for (const run of all.filter((r) => r.name !== 'allows' && r.name !== 'child')) {
      assert.ok(run.timestamp >= run.data.tick - 5, `${run.id} was added ${run.data.tick - run.timestamp} ms before its tick`);
      assert.ok(!run.opts.delay, `${run.id} was added delayed`);
    }
    assert.ok(all.some((run) => run.name === 'allows' && run.data.tick - run.timestamp > 500), 'the allow job was staged');
    const { lastScheduledTick, skipped } = await ledger.jobState('paused');
    assert.ok((skipped.paused ?? 0) >= 2, 'the paused definition’s ticks are recorded as paused');
    assert.ok(lastScheduledTick! <= stoppedAt, 'each when due, not a horizon ahead (an unpause in time still counts)');
  });

  it('a run-time pause takes back the staged runs before they are due; resume stages again', { timeout: 40_000 }, async () => {
    jobs.set('pausable', job({ name: 'pausable' }));
    const runs = work();
    lead(1);
    const staged = await stagedRun('pausable');
    const tick = staged.data.tick;
    await ledger.pause('pausable', 'maintenance');
    await until('the staged run to be taken back', async () => (await state('pausable', tick)) === 'skipped|paused', 10_000);
    assert.equal(await queue.getJobState(staged.id!), 'unknown', 'its BullMQ job is gone');
    assert.equal(await redis.client.zscore(ledger.keys.pending('pausable'), String(tick)), null, 'nothing left pending');
    await until('the tick to pass', () => Date.now() > tick + 800, 10_000);
    assert.deepEqual(runs.filter((run) => run.tick >= tick), [], 'no run of the paused job started');
    const { enqueued, skipped } = await ledger.jobState('pausable');
    assert.equal(enqueued, runs.length, 'the taken-back run no longer counts as enqueued');
    assert.ok((skipped.paused ?? 0) >= 1);

    await ledger.resume('pausable');
    const again = await stagedRun('pausable');
    await until('a run after the resume', () => runs.find((run) => run.tick === again.data.tick), 10_000);
  });

  it('a job removed by hot reload has its staged runs taken back', { timeout: 30_000 }, async () => {
    jobs.set('removed', job({ name: 'removed' }));
    jobs.set('kept', job({ name: 'kept' }));
    const runs = work();
    const { producer } = lead(1);
    const staged = await stagedRun('removed');
    jobs.delete('removed');
    producer.reload();
    await until('the staged run to be taken back', async () => (await state('removed', staged.data.tick)) === 'skipped|removed', 10_000);
    assert.equal(await queue.getJobState(staged.id!), 'unknown');
    await until('the tick to pass', () => Date.now() > staged.data.tick + 800, 10_000);
    assert.equal(runs.filter((run) => run.id === staged.id).length, 0, 'the removed job did not run');
    assert.ok(runs.some((run) => run.tick === staged.data.tick && run.id.startsWith('kept@')), 'the other job ran at that tick');
  });

  it('an edit keeps a staged run its new schedule still has, takes back one it no longer has, and misses none of its new ticks', { timeout: 30_000 }, async () => {
    jobs.set('edited', job({ name: 'edited' }));
    const { producer } = lead(1);
    const first = await stagedRun('edited');
    jobs.set('edited', job({ name: 'edited', data: { version: 2 } }));
    producer.reload();
    // The reload is handled within a turn or two; give it ample time to (wrongly) act.
    await sleep(300);
    assert.equal(await decided('edited', first.data.tick), `enqueued|edited@${first.data.tick}`, 'same schedule: the staged run stands');
    assert.equal(await queue.getJobState(first.id!), 'delayed');

    const next = await stagedRun('edited');
    // Every 3 s from half a second before the staged tick: the new schedule does not have that tick, and
    // has one before it that is still ahead, which must not be lost behind the staged one.
    const earlier = next.data.tick - 500;
    jobs.set('edited', job({ name: 'edited', startAt: new Date(earlier) }));
    producer.reload();
    await until('the rescheduled tick to be taken back', async () => (await state('edited', next.data.tick)) === 'skipped|rescheduled', 10_000);
    assert.equal(await queue.getJobState(next.id!), 'unknown');
    await until('the new schedule’s earlier tick to be enqueued', async () => (await state('edited', earlier)) === `enqueued|edited@${earlier}`, 10_000);
  });

  it('a term that ends between staging and the tick leaves a valid run: the next leader neither stages it again nor loses it', { timeout: 30_000 }, async () => {
    jobs.set('handover', job({ name: 'handover' }));
    const runs = work();
    const staged = await stagedByEndedTerm('handover');
    lead(2);
    await until('the staged run to start', () => runs.find((run) => run.tick === staged.data.tick), 10_000);
    await until('a run of the new term', () => runs.find((run) => run.tick > staged.data.tick), 10_000);
    const ofTick = runs.filter((run) => run.tick === staged.data.tick);
    assert.equal(ofTick.length, 1, 'the tick ran once');
    const added = (await queue.getJobs(['completed'])) as Array<Job<TickJobData>>;
    assert.equal(added.find((run) => run.data.tick === staged.data.tick)?.data.token.leaderTransitions, 1, 'it is the first term’s run');
    assert.equal(await state('handover', staged.data.tick), `enqueued|handover@${staged.data.tick}`);
  });

  it('an edit walks back only to the newest tick recorded by now: a due tick of the new schedule is not skipped', { timeout: 30_000 }, async () => {
    jobs.set('densified', job({ name: 'densified' }));
    const { producer } = lead(1);
    const staged = await stagedRun('densified');
    const tick = staged.data.tick;
    // Past T − 2 s, with T staged: a new schedule every second has a tick that is already due, T − 2 s.
    await until('T − 1.9 s', () => Date.now() > tick - 1_900, 10_000);
    jobs.set('densified', job({ name: 'densified', every: '1s', catchup: { mode: 'all', window: '1m' } }));
    producer.reload();
    for (const due of [tick - 2_000, tick - 1_000, tick]) {
      await until(`the new schedule's tick ${due - tick} ms to be enqueued`, async () => (await state('densified', due)) === `enqueued|densified@${due}`, 10_000);
    }
  });

  it('a schedule edited during a handover: the next leader takes back the tick it lost and enqueues the one it gained', { timeout: 30_000 }, async () => {
    jobs.set('moved', job({ name: 'moved' }));
    const staged = await stagedByEndedTerm('moved');
    const earlier = staged.data.tick - 500;
    jobs.set('moved', job({ name: 'moved', startAt: new Date(earlier) }));
    lead(2);
    await until('the lost tick to be taken back', async () => (await state('moved', staged.data.tick)) === 'skipped|rescheduled', 10_000);
    await until('the gained tick to be enqueued', async () => (await state('moved', earlier)) === `enqueued|moved@${earlier}`, 10_000);
  });

  it('the next leader takes back a run staged by an earlier term when the job is paused', { timeout: 30_000 }, async () => {
    jobs.set('inherited', job({ name: 'inherited' }));
    const staged = await stagedByEndedTerm('inherited');
    // Paused while no instance leads: the notice reaches nobody, the takeover reads the pause.
    await ledger.pause('inherited');
    lead(2);
    await until('the inherited staged run to be taken back', async () => (await state('inherited', staged.data.tick)) === 'skipped|paused', 10_000);
    assert.equal(await queue.getJobState(staged.id!), 'unknown');
  });

  describe('a tick an earlier term claimed ahead of its due time and never confirmed, due while no leader ran, is decided by the next leader as a late staged run', () => {
    /**
     * Term 1 stages a run of `name`, claims the tick after it ahead of time (as its lane does a staging
     * lead before the tick) and dies before confirming it: with `added`, after its add reached BullMQ.
     * Returns that tick once it is past due, with no leader alive across it.
     */
    const claimedThenDied = async (name: string, added: boolean): Promise<number> => {
      const staged = await stagedByEndedTerm(name);
      const tick = staged.data.tick + 3_000;
      const jobId = `${name}@${tick}`;
      const [outcome] = await ledger.claimTicks(TERM_1, [{ job: name, tick, jobId, request: { previousTick: staged.data.tick } }]);
      assert.equal(outcome?.kind, 'claimed');
      if (added) {
        const data: TickJobData = { tick, token: TERM_1, data: undefined, manual: false, dueAt: tick };
        await queue.add(name, data, { jobId, delay: Math.max(1, tick - Date.now()) });
      }
      await until('the claimed tick to be past due', () => Date.now() > tick + 200, 10_000);
      return tick;
    };

    for (const added of [false, true]) {
      it(`paused meanwhile: taken back as paused (${added ? 'its run added' : 'its run never added'})`, { timeout: 30_000 }, async () => {
        jobs.set('claimed-ahead', job({ name: 'claimed-ahead' }));
        const tick = await claimedThenDied('claimed-ahead', added);
        await ledger.pause('claimed-ahead');
        lead(2);
        await until('the claimed tick to be decided', async () => (await state('claimed-ahead', tick))?.startsWith('skipped|'), 10_000);
        assert.equal(await state('claimed-ahead', tick), 'skipped|paused');
        assert.equal(await queue.getJobState(`claimed-ahead@${tick}`), 'unknown', 'no run of the tick is left in BullMQ');
      });
    }

    it('with a catch-up policy that keeps it: it runs once', { timeout: 30_000 }, async () => {
      jobs.set('kept', job({ name: 'kept', catchup: { mode: 'all', window: '1m' } }));
      const tick = await claimedThenDied('kept', false);
      const runs = work();
      lead(2);
      await until('the claimed tick to run', () => runs.find((run) => run.tick === tick), 10_000);
      assert.equal(await state('kept', tick), `enqueued|kept@${tick}`);
      assert.equal(runs.filter((run) => run.tick === tick).length, 1);
    });

    it('with no catch-up: taken back as a tick that came due while no leader ran', { timeout: 30_000 }, async () => {
      jobs.set('none', job({ name: 'none', catchup: { mode: 'none' } }));
      const tick = await claimedThenDied('none', true);
      lead(2);
      await until('the claimed tick to be decided', async () => (await state('none', tick))?.startsWith('skipped|'), 10_000);
      assert.match((await state('none', tick)) ?? '', /^skipped\|(catchup-limit|missed-window)$/);
    });
  });

  /**
   * Once `staged` is past due, a worker takes it (into BullMQ's active list, under its lock; with any
   * earlier run due) and holds it there unstarted, as a leasebeat worker does for a moment each time
   * stagedRunMayStart.lua tells it to hand the run back.
   */
  const heldPastDue = async (staged: Job<TickJobData>): Promise<{ run: Job<TickJobData>; held: Array<Job<TickJobData>>; token: string }> => {
    await until('the staged run to be past due', () => Date.now() > staged.data.tick + 200, 10_000);
    const holder = new Worker(QUEUE, undefined, { connection: redis.client.duplicate({ maxRetriesPerRequest: null }), autorun: false });
    workers.push(holder);
    const token = 'holding-worker';
    const held: Array<Job<TickJobData>> = [];
    for (let next; (next = (await holder.getNextJob(token, { block: false })) as Job<TickJobData> | undefined); ) held.push(next);
    const run = held.find((candidate) => candidate.id === staged.id);
    assert.ok(run, 'the worker holds the staged run');
    assert.equal(await queue.getJobState(staged.id!), 'active');
    return { run, held, token };
  };

  describe('a job removed while no instance leads (a deploy) has its staged runs taken back by the next leader', () => {
    /** Stages a run of `gone` under term 1 (beside a job that stays), then stops term 1. */
    const stagedThenStopped = async (): Promise<Job<TickJobData>> => {
      jobs.set('gone', job({ name: 'gone' }));
      jobs.set('stays', job({ name: 'stays' }));
      return stagedByEndedTerm('gone');
    };

    it('a staged run', { timeout: 30_000 }, async () => {
      const staged = await stagedThenStopped();
      jobs.delete('gone');
      lead(2);
      await until('the removed job’s staged run to be taken back', async () => (await state('gone', staged.data.tick)) === 'skipped|removed', 10_000);
      assert.equal(await queue.getJobState(staged.id!), 'unknown');
    });

    // Chaos (Sentinel seed 5, Cluster seeds 15, 17, 18): runs of a schedule removed around a failover,
    // staged by a term that ended, stayed in BullMQ to the end: workers hand such a run back each second
    // (no leader reviews a removed job), and the next term's sweep looked for them in delayed sets only.
    it('a staged run that came due meanwhile, waiting in the wait list', { timeout: 30_000 }, async () => {
      const staged = await stagedThenStopped();
      jobs.delete('gone');
      await until('the staged run to be past due', () => Date.now() > staged.data.tick + 200, 10_000);
      await staged.promote();
      assert.equal(await queue.getJobState(staged.id!), 'waiting');
      lead(2);
      await until('the removed job’s late staged run to be taken back', async () => (await state('gone', staged.data.tick)) === 'skipped|removed', 10_000);
      assert.equal(await queue.getJobState(staged.id!), 'unknown', 'no run of the tick is left in BullMQ');
    });

    it('a staged run that came due meanwhile, held by a worker: taken back once the worker hands it back', { timeout: 30_000 }, async () => {
      const staged = await stagedThenStopped();
      jobs.delete('gone');
      const { held, token } = await heldPastDue(staged);
      lead(2);
      await until('the take-back to be marked', async () => (await state('gone', staged.data.tick))?.startsWith('unstaging|'), 10_000);
      // The worker hands it back, as a leasebeat worker does while no leader has reviewed the job.
      for (const each of held) await each.moveToDelayed(Date.now() + 1_000, token);
      await until('the removed job’s late staged run to be taken back', async () => (await state('gone', staged.data.tick)) === 'skipped|removed', 10_000);
      assert.equal(await queue.getJobState(staged.id!), 'unknown', 'no run of the tick is left in BullMQ');
    });

    it('a claim term 1 left unconfirmed whose staged add landed, come due meanwhile', { timeout: 30_000 }, async () => {
      const staged = await stagedThenStopped();
      // As if term 1 died after the add, before its confirm: the tick is still only claimed.
      const tick = staged.data.tick;
      await redis.client.hset(ledger.keys.ledger('gone'), String(tick), `claimed|${TERM_1.generation}|${TERM_1.leaderTransitions}|${staged.id}`);
      await redis.client.zadd(ledger.keys.pending('gone'), tick, String(tick));
      jobs.delete('gone');
      await until('the staged run to be past due', () => Date.now() > tick + 200, 10_000);
      lead(2);
      await until('the removed job’s staged run to be taken back', async () => (await state('gone', tick)) === 'skipped|removed', 10_000);
      assert.equal(await queue.getJobState(staged.id!), 'unknown', 'no run of the tick is left in BullMQ');
    });

    it('a take-back of it that term 1 marked and did not finish', { timeout: 30_000 }, async () => {
      const staged = await stagedThenStopped();
      assert.equal(await markedByTerm1('gone', staged, 'removed'), 'marked');
      jobs.delete('gone');
      lead(2);
      await until('the take-back to be finished', async () => (await state('gone', staged.data.tick)) === 'skipped|removed', 10_000);
      assert.equal(await redis.client.zscore(ledger.keys.pending('gone'), String(staged.data.tick)), null, 'nothing left pending');
    });
  });

  // Chaos (Sentinel seed 5): a schedule removed while its lane retried the confirm of a staged tick whose add
  // had landed (the confirm's WAIT unanswered while Redis failed over). The lane ended having taken back only
  // the runs it had confirmed: the claim stayed pending and its run in BullMQ, where a worker either started
  // it after the removal or, once a run had to be confirmed to start, held it for ever.
  it('a job removed while its lane retries the confirm of a staged run that BullMQ has: the run is taken back', { timeout: 30_000 }, async () => {
    jobs.set('gone', job({ name: 'gone' }));
    let failing = true;
    let failed = 0;
    const direct = directWrites(redis.client);
    const keys = new KeySpace();
    // confirmTicks.lua, confirming a tick of `gone` (its batch may hold other jobs' ticks too).
    const confirmOfGone = (source: string, scriptKeys: string[]): boolean =>
      source.includes('Records that the runs of claimed ticks are in BullMQ') && scriptKeys.includes(keys.ledger('gone'));
    ledger = new TickLedger(redis.client, keys, {
      ...direct,
      script: (script, scriptKeys, args, decides) => {
        if (failing && confirmOfGone(script.source, scriptKeys)) {
          failed++;
          return Promise.reject(new Error('the confirm was not acknowledged (a failover under way)'));
        }
        return direct.script(script, scriptKeys, args, decides);
      },
    });
    const { producer } = lead(1);
    await until('the confirm of a staged run of gone to have failed', () => failed > 0, 10_000);
    const tick = (await ledger.jobState('gone')).lastScheduledTick!;
    assert.match((await state('gone', tick)) ?? '', /^claimed\|/, 'its claim unconfirmed');
    assert.equal(await queue.getJobState(tickJobId('gone', tick)), 'delayed', 'its add landed');
    jobs.delete('gone');
    producer.reload();
    failing = false;
    await until('the staged run to be taken back', async () => (await state('gone', tick)) === 'skipped|removed', 10_000);
    assert.equal(await queue.getJobState(tickJobId('gone', tick)), 'unknown', 'no run of the tick is left in BullMQ');
  });

  // Chaos (aimed Cluster seed 1): a term claimed a staged tick and its add never landed (BullMQ's primary
  // died, then the term ended). The job's removal left the claim pending for good: a removed job's runs
  // were looked for in BullMQ only, and this one was not there, though a retried add could still land.
  it('a job removed while its lane retries an add that never landed: the claim is taken back, and a late add of it runs nothing', { timeout: 30_000 }, async () => {
    jobs.set('gone', job({ name: 'gone' }));
    let failing = true;
    const writes = addsFailingWhile(redis.client, () => failing);
    const { producer } = lead(1, { writes });
    await until('an add of gone to have failed', () => writes.failed > 0, 10_000);
    const tick = (await ledger.jobState('gone')).lastScheduledTick!;
    const jobId = tickJobId('gone', tick);
    assert.match((await state('gone', tick)) ?? '', /^claimed\|/, 'its claim unconfirmed');
    jobs.delete('gone');
    producer.reload();
    await until('the claim to be taken back', async () => (await state('gone', tick)) === 'skipped|removed', 10_000);
    failing = false;
    // The add the lane sent before the removal lands only now: BullMQ holds the placeholder of its id.
    await lateStagedAdd(queue, 'gone', tick, jobId);
    assert.equal(await queue.getJobState(jobId), 'unknown', 'the late add left no run');
    assert.deepEqual(await queue.getJobCounts('delayed', 'wait'), { delayed: 0, wait: 0 });
  });

  describe('a take-back interrupted by the end of its term is finished by the next leader', () => {
    /** Stages a run under term 1, stops, and marks it for take-back as if term 1 had then died. */
    const interrupted = async (): Promise<{ tick: number; id: string }> => {
      jobs.set('interrupted', job({ name: 'interrupted' }));
      const staged = await stagedByEndedTerm('interrupted');
      await ledger.pause('interrupted');
      assert.equal(await markedByTerm1('interrupted', staged), 'marked');
      return { tick: staged.data.tick, id: staged.id! };
    };

    const finishedByNextLeader = async ({ tick, id }: { tick: number; id: string }): Promise<void> => {
      const runs = work();
      lead(2);
      await until('the take-back to be finished', async () => (await state('interrupted', tick)) === 'skipped|paused', 10_000);
      assert.equal(await queue.getJobState(id), 'unknown', 'the run is in no list');
      assert.ok((await redis.client.pttl(queue.toKey(id))) > 0, 'its hash is kept, to expire: a late add of the same id stays a no-op');
      assert.equal(await redis.client.zscore(ledger.keys.pending('interrupted'), String(tick)), null, 'nothing left pending');
      await until('the tick to pass', () => Date.now() > tick + 800, 10_000);
      assert.equal(runs.filter((run) => run.tick === tick).length, 0, 'the taken-back run never started');
    };

    it('marked, not yet pulled from the delayed set', { timeout: 30_000 }, async () => {
      await finishedByNextLeader(await interrupted());
    });

    it('pulled from the delayed set, not yet recorded', { timeout: 30_000 }, async () => {
      const run = await interrupted();
      assert.equal(await redis.client.zrem(queue.keys.delayed!, run.id), 1);
      await redis.client.pexpire(queue.toKey(run.id), 3_600_000);
      await finishedByNextLeader(run);
    });

    // Chaos (npm run chaos -- --minutes 1 --instances 3 --lock redis --redis cluster --seed 18 --lead
    // bull-primary-kill-after-handler,bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait):
    // a take-back of tenant-2's claim was marked, and its add again lost with BullMQ's primary; the next
    // lane found no job, took that for a run promoted or started first, and recorded it enqueued: no run.
    it('marked, its run not in BullMQ at all (its add never landed, or a failover lost it): recorded taken back, not enqueued', { timeout: 30_000 }, async () => {
      const run = await interrupted();
      assert.equal(await redis.client.zrem(queue.keys.delayed!, run.id), 1);
      assert.equal(await redis.client.del(queue.toKey(run.id)), 1);
      await finishedByNextLeader(run);
    });
  });

  it('a take-back that fails until after the due time is carried to its end, not dropped', { timeout: 40_000 }, async () => {
    jobs.set('stubborn', job({ name: 'stubborn' }));
    lead(1);
    const staged = await stagedRun('stubborn');
    // BullMQ's delayed set becomes unusable: every pull fails (WRONGTYPE), and no worker runs.
    const delayed = queue.keys.delayed!;
    await redis.client.rename(delayed, `${delayed}:aside`);
    await redis.client.set(delayed, 'not a sorted set');
    await ledger.pause('stubborn');
    await until('the take-back to be marked', async () => (await state('stubborn', staged.data.tick))?.startsWith('unstaging|'), 10_000);
    await until('the due time to pass', () => Date.now() > staged.data.tick + 1_000, 10_000);
    // Back, with no worker yet to promote the run (a promotion winning now would be a fair outcome too).
    await redis.client.del(delayed);
    await redis.client.rename(`${delayed}:aside`, delayed);
    await until('the take-back to finish', async () => (await state('stubborn', staged.data.tick)) === 'skipped|paused', 15_000);
    assert.equal(await redis.client.zscore(ledger.keys.pending('stubborn'), String(staged.data.tick)), null, 'nothing left pending');
    assert.equal(await queue.getJobState(staged.id!), 'unknown', 'the run is in no list: no worker can take it');
  });

  it('a run whose take-back cannot pull it (BullMQ failing over) is held by workers past its due time, then taken back', { timeout: 40_000 }, async () => {
    jobs.set('unpulled', job({ name: 'unpulled' }));
    // BullMQ's writes through the producer (adds, take-back pulls) fail while `failing`, as they do while
    // its primary fails over; promotions and the workers' own calls go on.
    let failing = false;
    const writes = writesThrough(redis.client, (write) => (failing ? Promise.reject(new Error('WAIT failed: failing over')) : write()));
    const { producer } = lead(1, { writes });
    const started: string[] = [];
    const pool = testWorkerPool({ connection: redis.client, logger, ...stagedRunsHeldBy(ledger) });
    pool.update(new Map([['unpulled', job({ name: 'unpulled', handler: (run) => void started.push(run.id ?? '') })]]));
    try {
      const staged = await stagedRun('unpulled');
      failing = true;
      // Removed (a hot reload): its lane marks the take-back, and the pull fails again and again.
      jobs.delete('unpulled');
      producer.reload();
      await until('the take-back to be marked', async () => (await state('unpulled', staged.data.tick))?.startsWith('unstaging|'), 10_000);
      await until('the due time to pass, BullMQ promoting the run to a worker', () => Date.now() > staged.data.tick + 2_000, 10_000);
      assert.deepEqual(started, [], 'a worker started a run whose take-back was under way');
      failing = false;
      await until('the take-back to finish', async () => (await state('unpulled', staged.data.tick)) === 'skipped|removed', 15_000);
      assert.deepEqual(started, []);
    } finally {
      await pool.close(1_000);
    }
  });

  // Chaos (npm run chaos -- --minutes 1 --instances 3 --lock redis --redis cluster --seed 18 --lead
  // bull-primary-kill-after-handler,bull-primary-kill-during-staged-delay,ledger-primary-kill-between-claim-and-wait):
  // tenant-5 was edited every 1 s → every 2 s 1,687 ms before its staged odd tick while BullMQ's cluster was
  // down; its lane was inside a BullMQ write that hung until after the tick, so the take-back was not even
  // marked: the run ran, 1 s after an edit that has no such tick.
  it('an edit heard while a BullMQ write of the lane hangs (its primary failing over) marks the take-backs at once: workers hold the runs', { timeout: 40_000 }, async () => {
    jobs.set('stalled', job({ name: 'stalled', every: '1s' }));
    // BullMQ's writes through the producer (adds, take-back pulls) hang while `hanging`, as they do in the
    // offline queue while its cluster is down; the ledger's and the workers' go on.
    let hanging = false;
    const held: Array<() => void> = [];
    const writes = writesThrough(redis.client, <T>(write: () => Promise<T>): Promise<T> =>
      hanging ? new Promise<T>((resolve, reject) => held.push(() => void write().then(resolve, reject))) : write(),
    );
    const { producer } = lead(1, { writes });
    const started: number[] = [];
    const pool = testWorkerPool({ connection: redis.client, logger, ...stagedRunsHeldBy(ledger) });
    pool.update(new Map([['stalled', job({ name: 'stalled', every: '1s', handler: (run) => void started.push(run.data.tick) })]]));
    try {
      // Two runs staged ahead, each with room before its tick. A run staged nearer its tick may come due
      // before a loaded machine has even heard the edit: it is left out.
      const later = await until('two staged runs with room', async () => {
        const delayed = ((await queue.getJobs(['delayed'])) as Array<Job<TickJobData>>).filter((run) => run.name === 'stalled' && run.data.tick - Date.now() >= ROOM_MS);
        return delayed.length >= 2 && delayed.sort((a, b) => a.data.tick - b.data.tick);
      }, 10_000);
      const ticks = later.map((run) => run.data.tick);
      // A new interval of 7 s or more that has none of them: each is to be taken back, one after another,
      // by the lane.
      let seconds = 7;
      while (ticks.some((tick) => tick % (seconds * 1_000) === 0)) seconds++;
      const every = `${seconds}s`;
      hanging = true;
      jobs.set('stalled', job({ name: 'stalled', every }));
      producer.reload();
      await until('the last tick to pass', () => Date.now() > ticks.at(-1)! + 1_000, 10_000);
      assert.deepEqual(started.filter((tick) => ticks.includes(tick)), [], 'a worker started a run its new schedule has not');
      for (const tick of ticks) assert.match((await state('stalled', tick)) ?? '', /^unstaging\|rescheduled\|/, 'marked, to be pulled once BullMQ answers');
      hanging = false;
      for (const write of held.splice(0)) write();
      for (const tick of ticks) await until(`tick ${tick} to be taken back`, async () => (await state('stalled', tick)) === 'skipped|rescheduled', 15_000);
      assert.deepEqual(started.filter((tick) => ticks.includes(tick)), []);
    } finally {
      hanging = false;
      for (const write of held.splice(0)) write();
      await pool.close(1_000);
    }
  });

  it('a run that started and waits in the delayed set for a retry is not taken back', { timeout: 40_000 }, async () => {
    jobs.set('retried', job({ name: 'retried', attempts: 2, backoff: { type: 'fixed', delay: 60_000 } }));
    const failing: Worker = new Worker(QUEUE, (): Promise<void> => Promise.reject(new Error('first attempt fails')), { connection: redis.client.duplicate({ maxRetriesPerRequest: null }) });
    workers.push(failing);
    const staged = await stagedByEndedTerm('retried');
    await until('the first attempt to fail into its retry delay', async () => {
      const run = await queue.getJob(staged.id!);
      return run?.attemptsMade === 1 && (await run.getState()) === 'delayed';
    }, 15_000);
    // Term 1 marked a take-back and died before the pull: the next leader finishes it, and must see the run started.
    await ledger.pause('retried');
    assert.equal(await markedByTerm1('retried', staged), 'marked');
    lead(2);
    await until('the take-back to settle', async () => (await state('retried', staged.data.tick)) === `enqueued|${staged.id}`, 10_000);
    assert.equal(await queue.getJobState(staged.id!), 'delayed', 'its retry stands');
  });

  it('a run promoted but not started before its take-back is still taken back: only a start wins the race', { timeout: 30_000 }, async () => {
    jobs.set('late', job({ name: 'late' }));
    const staged = await stagedByEndedTerm('late');
    // The promotion came first: the run waits in the wait list, unstarted, when the take-back is marked.
    await staged.promote();
    await ledger.pause('late');
    assert.equal(await markedByTerm1('late', staged), 'marked');
    lead(2);
    await until('the take-back to settle', async () => (await state('late', staged.data.tick)) === 'skipped|paused', 10_000);
    assert.equal(await queue.getJobState(staged.id!), 'unknown', 'pulled from the wait list: no worker can take it');
  });

  describe('a late staged run that a worker holds unstarted at the takeover (it hands such runs back each second until a leader reviews the job) is decided once the worker lets go', () => {
    /** Term 1 stages a run of `name` and ends (then `meanwhile` runs: a pause, say); the run is held past due; then term 2 takes the job over. */
    const heldAtTakeover = async (name: string, meanwhile = (): Promise<void> => Promise.resolve()): Promise<{ run: Job<TickJobData>; held: Array<Job<TickJobData>>; token: string }> => {
      const staged = await stagedByEndedTerm(name);
      await meanwhile();
      const holding = await heldPastDue(staged);
      lead(2);
      // Until the takeover has marked the take-back (or, had it settled the run as running at once, reviewed
      // the job); then ample time for its pull to (wrongly) settle the run while the worker holds it.
      await until('the take-back to be marked', async () => (await state(name, staged.data.tick)) !== `enqueued|${staged.id}` || (await reviewedBy(name)) === 'gen-1|2', 10_000);
      await sleep(300);
      return holding;
    };

    const reviewedBy = (name: string): Promise<string | null> => redis.client.hget(ledger.keys.jobState(name), 'reviewedBy');

    for (const [kind, catchup, reason] of [
      ['paused meanwhile', undefined, /^skipped\|paused$/],
      ['with no catch-up', { mode: 'none' }, /^skipped\|(catchup-limit|missed-window)$/],
    ] as const) {
      it(`${kind}: undecided while held, taken back once handed back`, { timeout: 30_000 }, async () => {
        jobs.set('held', job({ name: 'held', ...(catchup && { catchup }) }));
        const { run, held, token } = await heldAtTakeover('held', async () => {
          if (!catchup) await ledger.pause('held');
        });
        const tick = run.data.tick;
        assert.match((await state('held', tick)) ?? '', /^unstaging\|/, 'a run a worker holds unstarted is neither running nor taken back yet');
        assert.notEqual(await reviewedBy('held'), 'gen-1|2', 'the job is not reviewed (workers may not start its staged runs) while one is undecided');
        // The worker hands them back, as a leasebeat worker does while no leader has reviewed the job.
        for (const each of held) await each.moveToDelayed(Date.now() + 1_000, token);
        await until('the take-back to be settled', async () => !(await state('held', tick))?.startsWith('unstaging|'), 10_000);
        assert.match((await state('held', tick)) ?? '', reason);
        assert.equal(await queue.getJobState(run.id!), 'unknown', 'no run of the tick is left in BullMQ');
        await until('the job to be reviewed by term 2', async () => (await reviewedBy('held')) === 'gen-1|2', 10_000);
      });
    }

    /*
     * The chaos audit found such a take-back left `unstaging` for good: a runtime schedule created during
     * the term found its earlier life's run held by a worker of a killed process, and was removed before the
     * worker let go. Its lane stopped, and the term's sweep of removed jobs had run at its start.
     */
    it('a job loaded during the term and removed while held: the take-back is still settled once the worker lets go', { timeout: 45_000 }, async () => {
      jobs.set('dropped', job({ name: 'dropped', catchup: { mode: 'none' } }));
      let removedAt = Infinity;
      let heldSinceRemoval = 0;
      // The take-backs found held, as the producer warns of them.
      const log = pino({ level: 'warn' }, { write: (line: string) => void (line.includes('RunHeldError') && Date.now() > removedAt && heldSinceRemoval++) });
      const staged = await stagedByEndedTerm('dropped');
      jobs.delete('dropped');
      const { run, held, token } = await heldPastDue(staged);
      // Term 2 starts without the job, then loads it: the take-back is marked by the term's sweep of removed
      // jobs (`removed`) if it ran first, else by the job's lane (the catch-up policy). A mark keeps its reason.
      const leader = lead(2, { log });
      await until('the second term to raise the fence', async () => (await ledger.fence()).leaderTransitions === 2, 10_000);
      jobs.set('dropped', job({ name: 'dropped', catchup: { mode: 'none' } }));
      leader.producer.reload();
      await until('the take-back to be marked', async () => (await state('dropped', run.data.tick))?.startsWith('unstaging|'), 10_000);
      jobs.delete('dropped');
      leader.producer.reload();
      await until('the removal to take its lane', () => leader.producer.laneCounts().files === 0, 10_000);
      removedAt = Date.now();
      // Past the attempt that was in flight at the removal: the producer goes on trying with no lane.
      await until('a second held take-back after the removal', () => heldSinceRemoval >= 2, 15_000);
      for (const each of held) await each.moveToDelayed(Date.now() + 1_000, token);
      await until('the take-back to be settled', async () => !(await state('dropped', run.data.tick))?.startsWith('unstaging|'), 10_000);
      assert.match((await state('dropped', run.data.tick)) ?? '', /^skipped\|(removed|catchup-limit|missed-window)$/);
      assert.equal(await queue.getJobState(run.id!), 'unknown', 'no run of the tick is left in BullMQ');
    });

    it('the worker starts it instead: it runs, recorded enqueued (only a start wins the race)', { timeout: 30_000 }, async () => {
      jobs.set('started', job({ name: 'started', catchup: { mode: 'none' } }));
      const { run, held, token } = await heldAtTakeover('started');
      assert.match((await state('started', run.data.tick)) ?? '', /^unstaging\|/);
      // What startRuns.lua records as the worker starts the handler; the others are handed back.
      await redis.client.hincrby(queue.toKey(run.id!), 'leasebeatStarts', 1);
      for (const each of held) if (each !== run) await each.moveToDelayed(Date.now() + 1_000, token);
      await until('the take-back to be settled', async () => !(await state('started', run.data.tick))?.startsWith('unstaging|'), 10_000);
      assert.equal(await state('started', run.data.tick), `enqueued|${run.id}`);
      assert.equal(await queue.getJobState(run.id!), 'active', 'left to the worker that started it');
    });
  });

  it('a stale term can neither stage nor take back a run', { timeout: 30_000 }, async () => {
    jobs.set('fenced', job({ name: 'fenced' }));
    const staged = await stagedByEndedTerm('fenced');
    lead(2);
    await until('the second term to raise the fence', async () => (await ledger.fence()).leaderTransitions === 2, 10_000);
    assert.equal(await markedByTerm1('fenced', staged), 'fenced');
    const [outcome] = await ledger.claimTicks(TERM_1, [{ job: 'fenced', tick: staged.data.tick + 60_000, jobId: 'x', request: { previousTick: staged.data.tick } }]);
    assert.deepEqual(outcome, { kind: 'fenced' });
    assert.equal(await state('fenced', staged.data.tick), `enqueued|${staged.id}`);
  });

  it('catch-up: ticks missed while no leader ran are added at once, then the next tick is staged', { timeout: 30_000 }, async () => {
    jobs.set('catching', job({ name: 'catching', every: '1s', catchup: { mode: 'all', window: '1m' } }));
    const first = lead(1, { stageAheadMs: 0 });
    await until('a first tick', async () => (await ledger.jobState('catching')).enqueued >= 1, 10_000);
    await first.stop();
    const { lastScheduledTick } = await ledger.jobState('catching');
    await sleep(2_500);
    const since = Date.now();
    lead(2);
    await until('a staged run', async () => {
      const delayed = (await queue.getJobs(['delayed'])) as Array<Job<TickJobData>>;
      return delayed.find((run) => run.data.tick > since + 500);
    }, 10_000);
    const added = (await queue.getJobs(['waiting', 'delayed'])) as Array<Job<TickJobData>>;
    const missed = added.filter((run) => run.data.tick > lastScheduledTick! && run.data.tick <= since);
    assert.ok(missed.length >= 2, `the ticks missed during the outage were caught up (${missed.length})`);
    for (const run of missed) assert.ok(!run.opts.delay, `missed tick ${run.id} was not delayed`);
  });
});
