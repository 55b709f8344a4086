import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { KeySpace } from '../../src/redis/keys.js';
import { Producer, type CannotProduceReason } from '../../src/producing/producer.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { silentGaps, ticksBetween } from '../support/ledger-audit.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJobWith } from '../support/scheduled-job.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: 'silent' });

const scheduled = scheduledJobWith({ every: '1s', handler: () => undefined });

/** Waits until the wall clock reaches `at` (ms since the epoch). */
const sleepUntil = (at: number): Promise<void> => sleep(Math.max(0, at - Date.now()));

/**
 * A producer whose Redis traffic (ledger and BullMQ) goes through a TCP proxy the test can partition, with
 * the scheduler's connection settings: no command is replayed across a lost connection.
 */
class ProxiedProducer {
  readonly redis: Redis;
  readonly queues: QueueSet;
  readonly producer: Producer;
  readonly calls: Array<{ reason: CannotProduceReason; at: number }> = [];

  constructor(proxy: TcpProxy, jobs: Map<string, ScheduledJob>, unreachableLimitMs?: number) {
    this.redis = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    this.redis.on('error', () => undefined);
    const ledger = new TickLedger(this.redis, new KeySpace());
    this.queues = new QueueSet({ connection: this.redis });
    this.producer = new Producer({
      redis: this.redis,
      ledger,
      queues: this.queues,
      jobs: () => jobs,
      stillLeading: () => true,
      logger,
      unreachableLimitMs,
      onCannotProduce: (reason) => this.calls.push({ reason, at: Date.now() }),
    });
  }

  async close(): Promise<void> {
    await this.queues.close().catch(() => undefined);
    this.redis.disconnect();
  }
}

describe('Producer under Redis faults', () => {
  const redis = useRedis();
  let ledger: TickLedger;
  let proxy: TcpProxy;

  redis.beforeClose(() => proxy?.close());
  beforeEach(async () => {
    await proxy?.close();
    await redis.client.flushall();
    ledger = new TickLedger(redis.client, new KeySpace());
    proxy = await TcpProxy.start({ port: redis.server.port });
  });

  it('ticks whose claims failed are never lost when the leader is killed before retrying them', { timeout: 30_000 }, async () => {
    const jobs = new Map([['fast', scheduled({ name: 'fast' })]]);
    const leader = new ProxiedProducer(proxy, jobs);
    const first = new AbortController();
    const run = leader.producer.run(term(1), first.signal);
    const t0 = await until('a first enqueued tick', async () => (await ledger.jobState('fast')).enqueued >= 1 && (await ledger.jobState('fast')).lastScheduledTick, 10_000);
    // The claims of t0+1 s and t0+2 s are held, then fail when the connection resets; Redis is
    // reachable again before t0+3 s comes due.
    await sleepUntil(t0 + 500);
    proxy.partition('blackhole');
    await sleepUntil(t0 + 2_900);
    proxy.heal('reset');
    // Killed after t0+3 s came due, before any retry of the failed ticks.
    await until('t0+3 s to be due', () => Date.now() >= t0 + 3_300, 10_000, 5);
    first.abort();
    await run;
    await leader.close();

    const next = new AbortController();
    const queues = new QueueSet({ connection: redis.client });
    const successor = new Producer({ redis: redis.client, ledger, queues, jobs: () => jobs, stillLeading: () => true, logger });
    const running = successor.run(term(2), next.signal);
    const last = await until('the next term to produce', async () => {
      const tick = (await ledger.jobState('fast')).lastScheduledTick ?? 0;
      return tick >= t0 + 4_000 && tick;
    }, 10_000);
    next.abort();
    await running;
    await queues.close();
    assert.deepEqual(await silentGaps(ledger, 'fast', ticksBetween(t0, last, 1000)), [], 'every tick has a job or a recorded skip');
    // A tick the successor claimed after `last` may still be pending when it stops (its next term adds it).
    assert.deepEqual((await ledger.pendingTicks('fast')).filter((tick) => tick <= last), [], 'no claim left pending up to the last tick produced');
  });

  it('a leader that cannot reach Redis for longer than the limit says so once, and not before', { timeout: 30_000 }, async () => {
    const jobs = new Map([['hourly', scheduled({ name: 'hourly', every: '1h' })]]);
    const limitMs = 1_500;
    const leader = new ProxiedProducer(proxy, jobs, limitMs);
    const stop = new AbortController();
    const run = leader.producer.run(term(1), stop.signal);
    await until('the fence to rise', async () => (await ledger.fence()).leaderTransitions === 1, 10_000);
    await sleep(2 * limitMs); // quiet, but reachable: its probes keep it healthy
    assert.deepEqual(leader.calls, []);
    proxy.partition('blackhole');
    const cutAt = Date.now();
    const [call] = await until('onCannotProduce', () => leader.calls.length > 0 && leader.calls, limitMs + 3_000);
    assert.equal(call!.reason, 'redis-unreachable');
    const after = call!.at - cutAt;
    assert.ok(after >= limitMs - 1_000 && after <= limitMs + 2_000, `reported ${after} ms after the partition (limit ${limitMs} ms)`);
    await sleep(limitMs);
    assert.equal(leader.calls.length, 1, 'reported once per outage');
    proxy.heal('reset');
    stop.abort();
    await run;
    await leader.close();
  });

  it('a leader that cannot reach Redis while setting up its term says so', { timeout: 30_000 }, async () => {
    const jobs = new Map([['fast', scheduled({ name: 'fast' })]]);
    proxy.partition('reject');
    const leader = new ProxiedProducer(proxy, jobs, 1_000);
    const stop = new AbortController();
    const run = leader.producer.run(term(1), stop.signal);
    const [call] = await until('onCannotProduce', () => leader.calls.length > 0 && leader.calls, 5_000);
    assert.equal(call!.reason, 'redis-unreachable');
    // Redis back before the scheduler resigned: the term produces.
    proxy.heal();
    await until('an enqueue after Redis came back', async () => (await ledger.jobState('fast')).enqueued >= 1, 15_000);
    stop.abort();
    await run;
    await leader.close();
  });
});
