import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { runRace, summarize } from '../support/race.js';

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

it('5 electors on the Redis lock, 20 s of kills and graceful stops: never two leaders, transitions rise', { timeout: 90_000 }, async (t) => {
  const seed = Number(process.env.RACE_SEED ?? Date.now() % 100_000);
  const timing = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 250 };
  const report = await runRace({
    seed,
    instances: 5,
    durationMs: 20_000,
    faultEveryMs: 1800,
    process: { lock: 'redis', redisUrl: redis.url, ...timing },
  });
  t.diagnostic(`seed ${seed} (replay with RACE_SEED=${seed}); ${report.terms.length} terms, ${report.faults.length} faults`);
  t.diagnostic(`crash failover (SIGKILL of the leader → next term): ${summarize(report.crashFailoverMs)}; bound ${timing.leaseDurationMs + 1.2 * timing.retryPeriodMs} ms + process start`);
  t.diagnostic(`graceful failover (SIGTERM of the leader → next term): ${summarize(report.releaseFailoverMs)}`);
  assert.deepEqual(report.overlaps, [], 'leadership terms overlapped');
  assert.deepEqual(report.nonIncreasingTransitions, [], 'leaderTransitions did not strictly increase');
  assert.ok(report.terms.length >= 3, `expected several terms, saw ${report.terms.length}`);
  assert.ok(report.crashFailoverMs.length + report.releaseFailoverMs.length >= 2, 'expected at least two leader faults');
  for (const ms of report.releaseFailoverMs) assert.ok(ms < timing.leaseDurationMs, `graceful failover took ${ms} ms: the release did not work`);
});
