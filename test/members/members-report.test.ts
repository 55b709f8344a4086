import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { MemberMonitor } from '../../src/members/monitor.js';
import type { MemberRecord } from '../../src/members/record.js';
import { resolveMemberSettings } from '../../src/members/settings.js';
import { formatMembersTable, membersReport } from '../../src/members/status.js';
import { MemberStore } from '../../src/members/store.js';
import { KeySpace } from '../../src/redis/keys.js';
import { silentLogger } from '../../src/util/logger.js';
import { ManualClock } from '../support/manual-clock.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

function record(identity: string, role: MemberRecord['role'], seq: number): MemberRecord {
  return { identity, version: 'test', startedAt: 0, seq, role, workers: 'running', activeJobs: 0, activeJobIds: [], cordoned: false, draining: false, ready: true };
}

/** Redis's clock, in ms: the one clock every member's age is measured on. */
async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe('the members report after a change of leader', () => {
  const redis = useRedis();

  it('shows the dead leader as a follower with its real heartbeat age, not "leader" and "0 ms ago"', async () => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'report-1'));
    // pod-a led and wrote its last beat; then it died. pod-b, alive, takes over.
    await store.beat(record('pod-a', 'leader', 7));
    const diedAt = await redisNow(redis.client);
    await store.beat(record('pod-b', 'follower', 3));
    // The takeover takes a lease duration in reality; a few hundred ms of Redis time is enough to tell.
    await until('Redis time to move 400 ms past the last beat of pod-a', async () => (await redisNow(redis.client)) >= diedAt + 400, 5_000);
    await store.beat(record('pod-b', 'leader', 4));

    // The new leader's monitor has seen nothing change yet: it starts pod-a's countdown at its Redis-stamped last write.
    const monitor = new MemberMonitor({ store, self: 'pod-b', settings: resolveMemberSettings(), clock: new ManualClock(), logger: silentLogger });
    await monitor.pass();
    const view = await store.health();
    const judged = view?.members.find((m) => m.identity === 'pod-a')?.heartbeatAgeMs ?? 0;
    assert.ok(judged >= 400, `the leader's judgement starts from the last write, not its takeover (${judged} ms)`);

    const report = membersReport(await store.list(), await store.cordons(), view, 'pod-b');
    const rows = new Map(report.members.map((m) => [m.identity, m]));
    assert.deepEqual(report.members.map((m) => [m.identity, m.role]), [['pod-b', 'leader'], ['pod-a', 'follower']]);
    assert.ok((rows.get('pod-a')?.heartbeatAgeMs ?? 0) >= 400, `pod-a age ${rows.get('pod-a')?.heartbeatAgeMs}`);
    assert.ok((rows.get('pod-b')?.heartbeatAgeMs ?? Infinity) < (rows.get('pod-a')?.heartbeatAgeMs ?? 0));
    assert.doesNotMatch(formatMembersTable(report).join('\n'), /pod-a .*leader/);

    // Without the lease holder, the judging leader stands in for it.
    assert.equal(membersReport(await store.list(), new Map(), view).members.find((m) => m.identity === 'pod-a')?.role, 'follower');
  });

  it('says cordon, workers and readiness once each, named: never "draining, cordoned, draining"', () => {
    const observed = (identity: string, fields: Partial<MemberRecord>) => ({ raw: identity, record: { ...record(identity, 'follower', 1), ...fields }, ageMs: 100 });
    const records = new Map([
      ['drained', observed('drained', { workers: 'draining', cordoned: true, draining: true, activeJobs: 1 })],
      ['asked', observed('asked', {})],
      ['stopping', observed('stopping', { workers: 'draining', draining: true, ready: false, reason: 'shutting down' })],
    ]);
    const lines = formatMembersTable(membersReport(records, new Map([['asked', { at: 0, note: '' }]]), undefined, ''));
    const state = (identity: string) => lines.find((line) => line.startsWith(identity))!.split(/\s{2,}/).at(-1);
    assert.equal(state('drained'), 'cordoned, workers draining');
    assert.equal(state('asked'), 'cordon requested, workers running');
    assert.equal(state('stopping'), 'workers draining, shutting down');
  });

  it('removes the beat stamp with the member, on leave and on removal', async () => {
    const store = new MemberStore(redis.client, new KeySpace('leasebeat', 'report-2'));
    await store.beat(record('pod-a', 'follower', 1));
    await store.beat(record('pod-c', 'follower', 1));
    const listed = await store.list();
    assert.ok(listed.get('pod-a')?.ageMs !== undefined);
    await store.leave('pod-a');
    assert.equal(await store.remove('pod-c', listed.get('pod-c')!.raw), true);
    assert.deepEqual(await redis.client.hgetall(store.beatsKey), {});
  });
});
