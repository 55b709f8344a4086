import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { tickJobId } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { Producer } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { ClaimCode, ScriptProtocolError, scriptCode } from '../../src/ledger/script-codes.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick } from '../../src/scheduling/plan.js';
import { silentGaps, ticksBetween } from '../support/ledger-audit.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });
const termA = { generation: 'uid-a', leaderTransitions: 3 };
const termB = { generation: 'uid-a', leaderTransitions: 4 };

describe('the ledger state machine closed (issue 18: the ledger\u2019s last holes)', () => {
  const redis = useRedis({ flush: true });
  let ledger: TickLedger;

  beforeEach(() => {
    ledger = new TickLedger(redis.client, new KeySpace());
  });

  it('a late confirm of an ended term is fenced: it does not overwrite the next term\u2019s take-back', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.equal((await ledger.claim(termA, 'j', 1000, 'j@1000')).kind, 'claimed');
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001), 'enqueued');
    // The next term takes the staged run back (a pause), while term A still has a confirm of it on the wire.
    await ledger.raiseFence(termB, 'b', 2);
    assert.equal(await ledger.markUnstaging(termB, 'j', 1000, 'j@1000', 'paused', 'leasebeat'), 'marked');
    assert.equal(await ledger.settleUnstaging('j', 1000, 'taken-back'), true);
    assert.equal(await ledger.tickState('j', 1000), 'skipped|paused');
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1002), 'fenced');
    assert.equal(await ledger.tickState('j', 1000), 'skipped|paused', 'the take-back stands');
    assert.equal((await ledger.jobState('j')).enqueued, 0);
  });

  it('a confirm moves only a claim of its own job id to enqueued, and says when there is none', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001), 'not-claimed', 'no claim at all');
    assert.equal(await ledger.tickState('j', 1000), undefined, 'nothing written');
    await ledger.claim(termA, 'j', 1000, 'j@1000');
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@other', 1001), 'not-claimed', 'a claim of another job id');
    assert.match((await ledger.tickState('j', 1000)) ?? '', /^claimed\|/);
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001), 'enqueued');
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1002), 'already-enqueued', 'a retried confirm changes nothing');
    assert.equal((await ledger.jobState('j')).enqueued, 1);
    assert.deepEqual(await ledger.pendingTicks('j'), []);
    await ledger.claim(termA, 'j', 2000, 'j@2000', { skip: 'overlap', previousTick: 1000 });
    assert.equal(await ledger.confirm(termA, 'j', 2000, 'j@2000', 2001), 'not-claimed', 'a skipped tick is not claimed');
    assert.equal(await ledger.tickState('j', 2000), 'skipped|overlap');
  });

  it('a record the watermark lost is counted again when the lane walks to it, so later claims are not refused for ever', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.claim(termA, 'j', 1000, 'j@1000');
    await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001);
    // What a promotion that lost the claim of 2000 but kept its confirm leaves (before confirms were fenced).
    await redis.client.hset(ledger.keys.ledger('j'), '2000', 'enqueued|j@2000');
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000 }), { kind: 'hole', lastScheduledTick: 1000 });
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000', { previousTick: 1000 }), { kind: 'settled', state: 'enqueued|j@2000' });
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 2000, 'the watermark counts it again');
    assert.deepEqual(await ledger.claim(termA, 'j', 3000, 'j@3000', { previousTick: 2000 }), { kind: 'claimed', retry: false });
    // Only in order: a record past a hole does not move the watermark over the hole.
    await redis.client.hset(ledger.keys.ledger('j'), '9000', 'enqueued|j@9000');
    await ledger.claim(termA, 'j', 9000, 'j@9000', { previousTick: 8000 });
    assert.equal((await ledger.jobState('j')).lastScheduledTick, 3000);
  });

  it('a claim of a run already added (its claim lost in a failover) stands even while the job is paused', async () => {
    await ledger.raiseFence(termA, 'a', 1);
    await ledger.pause('j');
    assert.deepEqual(await ledger.claim(termA, 'j', 1000, 'j@1000'), { kind: 'skipped', reason: 'paused' });
    assert.deepEqual(await ledger.claim(termA, 'j', 2000, 'j@2000', { added: true, previousTick: 1000 }), { kind: 'claimed', retry: false });
    assert.equal(await ledger.confirm(termA, 'j', 2000, 'j@2000', 2001), 'enqueued');
  });

  it('an unknown script code is an error, never read as another answer', () => {
    assert.equal(scriptCode('claimTicks', ClaimCode, '4'), ClaimCode.Buffered);
    assert.throws(() => scriptCode('claimTicks', ClaimCode, 7), (error: unknown) => error instanceof ScriptProtocolError && /claimTicks\.lua answered 7/.test(error.message));
    assert.throws(() => scriptCode('claimTicks', ClaimCode, null), ScriptProtocolError);
  });
});

describe('a producer over a ledger that a failover left inconsistent', () => {
  const redis = useRedis({ flush: true });

  const producer = (redis: Redis, job: ScheduledJob, ledger: TickLedger, queues: QueueSet): Producer =>
    new Producer({ redis, ledger, queues, jobs: () => new Map([[job.name, job]]), stillLeading: () => true, logger });

  it('a lost claim whose confirm landed does not stall the job: the next term enqueues the ticks after it', { timeout: 30_000 }, async () => {
    const job = scheduledJob({ name: 'stalled', every: '1s', handler: () => undefined, catchup: { window: '1m', mode: 'all', max: 100 } });
    const ledger = new TickLedger(redis.client, new KeySpace());
    const queues = new QueueSet({ connection: redis.client });
    try {
      // Term 1 recorded ticks up to T-1; the claim of T was lost and its (then unfenced) confirm landed.
      const t = nextTick(job, Date.now() - 4_000)!;
      await ledger.raiseFence(termA, 'a', 1);
      await ledger.claim(termA, job.name, t - 1000, tickJobId(job.name, t - 1000));
      await ledger.confirm(termA, job.name, t - 1000, tickJobId(job.name, t - 1000), t - 1000);
      await redis.client.hset(ledger.keys.ledger(job.name), String(t), `enqueued|${tickJobId(job.name, t)}`);
      const stop = new AbortController();
      const run = producer(redis.client, job, ledger, queues).run(term(5, 'uid-a'), stop.signal);
      const upTo = Date.now() + 1_000;
      await until('the ticks after the lost claim to be enqueued', async () => ((await ledger.jobState(job.name)).lastScheduledTick ?? 0) >= upTo, 15_000);
      stop.abort();
      await run;
      assert.deepEqual(await silentGaps(ledger, job.name, ticksBetween(t - 1000, upTo, 1000)), []);
      const state = await ledger.jobState(job.name);
      assert.deepEqual(state.skipped, {}, 'nothing was given up as missed');
    } finally {
      await queues.close();
    }
  });

  it('a claim lost between the add and its confirm is claimed again, then recorded enqueued: one run, no stall', { timeout: 30_000 }, async () => {
    const job = scheduledJob({ name: 'lost', every: '1s', handler: () => undefined, catchup: { window: '1m', mode: 'all', max: 100 } });
    const keys = new KeySpace();
    const ledger = new TickLedger(redis.client, keys);
    let lost: number | undefined;
    let confirms = 0;
    // The producer's connection goes through a proxy that holds its third confirm while everything the
    // claim it confirms wrote is taken back: what a promotion that lost the claim (and kept the add) leaves.
    const loseClaim = async (tick: number): Promise<void> => {
      await redis.client
        .multi()
        .hdel(keys.ledger(job.name), String(tick))
        .zrem(keys.ledgerIndex(job.name), String(tick))
        .zrem(keys.pending(job.name), String(tick))
        .hset(keys.jobState(job.name), 'lastScheduledTick', String(tick - 1000), 'lastJobId', tickJobId(job.name, tick - 1000), 'lastJobTick', String(tick - 1000))
        .exec();
      proxy.heal('deliver');
    };
    const proxy: TcpProxy = await TcpProxy.start(
      { port: redis.server.port },
      {
        onClientData: (chunk) => {
          // The confirm's keys: the job's pending set, and not its ledger index (which claims and takeovers read).
          if (lost !== undefined || !chunk.includes(':pending:lost') || chunk.includes(':ledger-index:') || ++confirms < 3) return;
          const tick = /lost@(\d+)/.exec(chunk.toString())?.[1];
          if (!tick) return;
          lost = Number(tick);
          proxy.partition('blackhole');
          void loseClaim(lost);
        },
      },
    );
    const viaProxy = new Redis({ port: proxy.port, maxRetriesPerRequest: 0 });
    const queues = new QueueSet({ connection: viaProxy });
    try {
      const stop = new AbortController();
      const run = producer(viaProxy, job, new TickLedger(viaProxy, keys), queues).run(term(1, 'uid-a'), stop.signal);
      await until('a confirm to be held while its claim is lost', () => lost, 10_000);
      await until('the ticks after it to be enqueued', async () => ((await ledger.jobState(job.name)).lastScheduledTick ?? 0) >= lost! + 2_000, 15_000);
      stop.abort();
      await run;
      assert.equal(await ledger.tickState(job.name, lost!), `enqueued|${tickJobId(job.name, lost!)}`, 'recorded as the run it is');
      const runs = await queues.get(job.queue).getJobs(['waiting', 'delayed', 'active', 'completed']);
      assert.equal(runs.filter((r) => r.id === tickJobId(job.name, lost!)).length, 1, 'its run was added once');
      const first = Math.min(...runs.map((r) => (r.data as { tick: number }).tick));
      assert.deepEqual(await silentGaps(ledger, job.name, ticksBetween(first, lost! + 2_000, 1000)), []);
    } finally {
      await queues.close();
      viaProxy.disconnect();
      await proxy.close();
    }
  });
});
