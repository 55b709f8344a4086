import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('../fixtures/jobs-multiprocess/', import.meta.url).pathname;
const JOB = 'every-second';
const LEASE_KEY = 'leasebeat:{leasebeat}:lease';

interface TickAudit {
  first: number;
  last: number;
  enqueued: number;
  skipped: Map<string, number>;
  pendingAtEnd: number[];
  problems: string[];
  maxLagMs: number;
}

/** Checks from Redis that every nominal tick has exactly one job (run at most once) or a recorded skip. */
async function auditTicks(redis: Redis, ledger: TickLedger, queue: Queue): Promise<TickAudit> {
  const ticks = (await redis.zrange(ledger.keys.ledgerIndex(JOB), 0, -1)).map(Number);
  const ranges = await ledger.skippedRanges(JOB);
  const runs = await redis.hgetall('test:runs');
  const pending = new Set(await ledger.pendingTicks(JOB));
  const audit: TickAudit = { first: ticks[0]!, last: ticks.at(-1)!, enqueued: 0, skipped: new Map(), pendingAtEnd: [], problems: [], maxLagMs: 0 };
  for (let tick = audit.first; tick <= audit.last; tick += 1000) {
    const state = await ledger.tickState(JOB, tick);
    const ran = Number(runs[String(tick)] ?? 0);
    if (ran > 1) audit.problems.push(`tick ${tick} ran ${ran} times`);
    if (state?.startsWith('enqueued|')) {
      audit.enqueued++;
      const job = await queue.getJob(`${JOB}@${tick}`);
      if (!job) audit.problems.push(`tick ${tick} is recorded as enqueued but BullMQ has no job`);
      else audit.maxLagMs = Math.max(audit.maxLagMs, job.timestamp - tick);
    } else if (state?.startsWith('skipped|')) {
      const reason = state.slice('skipped|'.length);
      audit.skipped.set(reason, (audit.skipped.get(reason) ?? 0) + 1);
    } else if (state?.startsWith('claimed|')) {
      if (pending.has(tick)) audit.pendingAtEnd.push(tick);
      else audit.problems.push(`tick ${tick} is claimed but not pending`);
    } else {
      const range = ranges.find((r) => r.from <= tick && tick <= r.to);
      if (range) audit.skipped.set(range.reason, (audit.skipped.get(range.reason) ?? 0) + 1);
      else audit.problems.push(`tick ${tick} has neither a job nor a recorded skip`);
    }
  }
  return audit;
}

describe('multi-process: three real `leasebeat start` processes on one Redis', () => {
  const redis = useRedis();
  let ledger: TickLedger;
  let queue: Queue;
  const instances: Instance[] = [];

  before(() => {
    ledger = new TickLedger(redis.client, new KeySpace());
    queue = new Queue('leasebeat', { connection: redis.client });
  });
  redis.beforeClose(async () => {
    killAll(instances);
    await queue.close();
  });

  it('SIGKILL the leader, then SIGTERM the next: every tick has exactly one job or a recorded skip', { timeout: 120_000 }, async (t) => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_SHUTDOWN_TIMEOUT: '5s', ...FAST_ELECTION };
    for (const id of ['a', 'b', 'c']) instances.push(startInstance(`mp-${id}`, env));
    const byIdentity = (identity: string | null): Instance | undefined => instances.find((i) => i.identity === identity);
    const enqueued = async (): Promise<number> => (await ledger.jobState(JOB)).enqueued;

    await until('ticks from the first leader', async () => (await enqueued()) >= 3 && true, 60_000, 50);
    await sleep(9_000);

    const first = byIdentity(await redis.client.hget(LEASE_KEY, 'holderIdentity'));
    assert.ok(first, 'a leader among the three');
    const beforeKill = await enqueued();
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    const second = await until('a new leader', async () => {
      const holder = await redis.client.hget(LEASE_KEY, 'holderIdentity');
      return holder && holder !== first.identity ? byIdentity(holder) : undefined;
    }, 20_000, 50);
    await until('enqueues by the new leader', async () => (await enqueued()) > beforeKill, 20_000, 50);
    t.diagnostic(`SIGKILL of the leader → first enqueue of the next term: ${Date.now() - killedAt} ms (lease 2 s, retry 250 ms)`);
    await sleep(9_000);

    const beforeTerm = await enqueued();
    const stoppedAt = Date.now();
    second.child.kill('SIGTERM');
    assert.equal(await second.exited(), 0, 'SIGTERM exits cleanly');
    const third = instances.find((i) => i !== first && i !== second)!;
    await until('enqueues by the last instance', async () => (await enqueued()) > beforeTerm, 20_000, 50);
    t.diagnostic(`SIGTERM of the leader → first enqueue of the next term: ${Date.now() - stoppedAt} ms (release, then about one retry period)`);
    assert.ok(third.logs.some((l) => l.msg === 'acquired the leader lease'));
    await sleep(9_000);

    third.child.kill('SIGTERM');
    assert.equal(await third.exited(), 0);

    const audit = await auditTicks(redis.client, ledger, queue);
    const fence = await ledger.fence();
    t.diagnostic(
      `ticks ${(audit.last - audit.first) / 1000 + 1} over ${((audit.last - audit.first) / 1000).toFixed(0)} s: ` +
        `${audit.enqueued} enqueued, skipped ${JSON.stringify(Object.fromEntries(audit.skipped))}, ` +
        `pending at the end ${audit.pendingAtEnd.length}, max enqueue lag ${audit.maxLagMs} ms, fence #${fence.leaderTransitions}, fenced ${fence.fenced}`,
    );
    const runners = new Set(Object.values(await redis.client.hgetall('test:runner')));
    t.diagnostic(`runs were processed by ${runners.size} different processes`);
    assert.deepEqual(audit.problems, []);
    assert.ok(audit.enqueued >= 25, `expected a steady stream of ticks, got ${audit.enqueued}`);
    assert.ok(audit.pendingAtEnd.length <= 1, 'only the last instance may leave a claim for the next leader');
    assert.ok(fence.leaderTransitions >= 2, 'two takeovers raised the fence twice');
    assert.ok(runners.size >= 2, 'every instance processes runs, not only the leader');
  });
});
