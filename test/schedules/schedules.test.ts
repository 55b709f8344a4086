import assert from 'node:assert/strict';
import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { createAdmin, createScheduler, ScheduleError, type Admin, type Scheduler } from '../../src/index.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { KeySpace } from '../../src/redis/keys.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const RUNS = 'test:schedule-runs';

/** A job type that records `<schedule id>@<tick>|<data>` for every run, and one more to be removed. */
function jobType(name: string, url: string): string {
  // Imported by URL: the file lives in a temporary folder, outside this package's node_modules.
  return `import { Redis } from ${JSON.stringify(import.meta.resolve('ioredis'))};
// No reconnecting once the suite's server has stopped: a retrying client would keep the process alive.
const redis = new Redis(${JSON.stringify(url)}, { maxRetriesPerRequest: null, retryStrategy: () => null });
redis.on('error', () => undefined);
export default {
  name: ${JSON.stringify(name)},
  handler: async (job, ctx) => void (await redis.rpush(${JSON.stringify(RUNS)}, job.name + '@' + ctx.tick.getTime() + '|' + JSON.stringify(ctx.data ?? null))),
};
`;
}

/** The recorded runs of one schedule, as [tick, data] in the order they ran. */
async function runsOf(redis: { lrange(key: string, from: number, to: number): Promise<string[]> }, id: string): Promise<Array<[number, unknown]>> {
  return (await redis.lrange(RUNS, 0, -1))
    .filter((run) => run.startsWith(`${id}@`))
    .map((run) => {
      const [head, data] = run.split('|') as [string, string];
      return [Number(head.split('@')[1]), JSON.parse(data) as unknown];
    });
}

function assertNoDuplicates(runs: Array<[number, unknown]>): void {
  const ticks = runs.map(([tick]) => tick);
  assert.equal(new Set(ticks).size, ticks.length, `a tick ran twice: ${ticks.join(', ')}`);
}

describe('runtime schedules on two instances (real Redis and BullMQ)', () => {
  const redis = useRedis();
  let dir: string;
  const schedulers: Scheduler[] = [];
  let admin: Admin;
  const ledger = (): TickLedger => new TickLedger(redis.client, new KeySpace());

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-schedules-'));
    await writeFile(join(dir, 'record.mjs'), jobType('record', redis.server.url));
    await writeFile(join(dir, 'doomed.mjs'), jobType('doomed', redis.server.url));
    for (const identity of ['a', 'b']) {
      const scheduler = createScheduler({
        connection: redis.server.url,
        jobsDir: dir,
        identity,
        election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
        members: { heartbeatIntervalMs: 200, graceMs: 1_000 },
      });
      await scheduler.start();
      schedulers.push(scheduler);
    }
    admin = createAdmin({ connection: redis.server.url, jobsDir: dir, who: 'test@ci' });
    await until('a leader', () => schedulers.some((s) => s.elector.isLeader()));
  });
  redis.beforeClose(async () => {
    await admin.close();
    await Promise.all(schedulers.map((s) => s.stop()));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('an upsert from a client with no instance of its own runs on its ticks, each tick once', { timeout: 60_000 }, async () => {
    const result = await admin.schedules.upsert('tenant-1', { job: 'record', every: '1s', data: { tenant: 1 } });
    assert.deepEqual(result, { id: 'tenant-1', version: 1, changed: true });
    await until('five runs', async () => (await runsOf(redis.client, 'tenant-1')).length >= 5, 30_000);
    const runs = await runsOf(redis.client, 'tenant-1');
    assertNoDuplicates(runs);
    assert.deepEqual(runs[0]![1], { tenant: 1 });
    const view = await admin.schedules.get('tenant-1');
    assert.equal(view?.updatedBy, 'test@ci');
    assert.equal(view?.trigger, 'every 1s');
    assert.equal(view?.problem, null);
  });

  it('an edit applies from the next tick after it: no tick lost, none doubled', { timeout: 60_000 }, async () => {
    await admin.schedules.upsert('edited', { job: 'record', every: '1s', data: { v: 1 } });
    await until('runs of the first version', async () => (await runsOf(redis.client, 'edited')).length >= 3, 30_000);
    const editedAt = Date.now();
    assert.equal((await admin.schedules.upsert('edited', { job: 'record', every: '1s', data: { v: 2 } })).version, 2);
    await until('runs of the second version', async () => (await runsOf(redis.client, 'edited')).filter(([, data]) => (data as { v: number }).v === 2).length >= 3, 30_000);
    const runs = (await runsOf(redis.client, 'edited')).sort(([a], [b]) => a - b);
    assertNoDuplicates(runs);
    const ticks = runs.map(([tick]) => tick);
    for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 1_000, `a tick was lost between ${ticks[i - 1]} and ${ticks[i]}`);
    // Every run after the edit was acknowledged plus one tick (and a staged run already in BullMQ) has the new data.
    for (const [tick, data] of runs) if (tick > editedAt + 3_000) assert.deepEqual(data, { v: 2 }, `tick ${tick}`);
  });

  it('writing the same spec again is a no-op, and concurrent upserts from many clients converge to one version', { timeout: 60_000 }, async () => {
    const clients = Array.from({ length: 6 }, () => createAdmin({ connection: redis.server.url, jobsDir: dir }));
    try {
      // bullmq #3085: instances upserting the same schedulers at boot.
      const same = await Promise.all(clients.map((c) => c.schedules.upsert('boot', { job: 'record', every: '1h' })));
      assert.deepEqual(same.map((r) => r.version), [1, 1, 1, 1, 1, 1]);
      assert.equal(same.filter((r) => r.changed).length, 1);
      // bullmq #2988: rapid upserts of different specs: one version each, the last one stored.
      const rapid = await Promise.all(clients.map((c, i) => c.schedules.upsert('rapid', { job: 'record', every: `${i + 2}h` })));
      assert.deepEqual(rapid.map((r) => r.version).sort(), [1, 2, 3, 4, 5, 6]);
      const last = rapid.find((r) => r.version === 6)!;
      const stored = await admin.schedules.get('rapid');
      assert.equal(stored?.spec.every, `${rapid.indexOf(last) + 2}h`);
      // Compare-and-set: a write that read version 6 wins once; the one behind it is refused.
      await admin.schedules.upsert('rapid', { job: 'record', every: '9h' }, { expectedVersion: 6 });
      await assert.rejects(admin.schedules.upsert('rapid', { job: 'record', every: '10h' }, { expectedVersion: 6 }), (e: unknown) => e instanceof ScheduleError && e.code === 'version-conflict');
      await assert.rejects(admin.schedules.upsert('rapid', { job: 'record', every: '10h' }, { expectedVersion: 0 }), (e: unknown) => e instanceof ScheduleError && e.code === 'version-conflict');
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('rapid concurrent edits of a ticking schedule from many clients: every tick once, none lost', { timeout: 60_000 }, async () => {
    const clients = Array.from({ length: 6 }, () => createAdmin({ connection: redis.server.url, jobsDir: dir }));
    try {
      await admin.schedules.upsert('churned', { job: 'record', every: '1s', data: { round: -1 } });
      await until('a run', async () => (await runsOf(redis.client, 'churned')).length >= 1, 30_000);
      for (let round = 0; round < 10; round++) {
        await Promise.all(clients.map((c, i) => c.schedules.upsert('churned', { job: 'record', every: '1s', data: { round, client: i } })));
        await sleep(200);
      }
      const editedAt = Date.now();
      await until('runs after the edits', async () => (await runsOf(redis.client, 'churned')).some(([tick]) => tick > editedAt + 2_000), 30_000);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    const runs = (await runsOf(redis.client, 'churned')).sort(([a], [b]) => a - b);
    assertNoDuplicates(runs);
    const ticks = runs.map(([tick]) => tick);
    for (let i = 1; i < ticks.length; i++) assert.equal(ticks[i]! - ticks[i - 1]!, 1_000, `a tick was lost between ${ticks[i - 1]} and ${ticks[i]}`);
  });

  it('remove stops the ticks and takes back a run staged ahead of its tick', { timeout: 60_000 }, async () => {
    await admin.schedules.upsert('removed', { job: 'record', every: '2s' });
    await until('a run', async () => (await runsOf(redis.client, 'removed')).length >= 1, 30_000);
    // Stage ahead is 2 s by default: a tick is staged as a delayed job most of the time.
    assert.equal(await admin.schedules.remove('removed'), true);
    const removedAt = Date.now();
    assert.equal(await admin.schedules.remove('removed'), false);
    await sleep(4_500);
    const late = (await runsOf(redis.client, 'removed')).filter(([tick]) => tick > removedAt + 500);
    assert.deepEqual(late, [], 'no tick after the removal ran');
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const left = [...(await queue.getDelayed()), ...(await queue.getWaiting())].filter((job) => job.name === 'removed');
      assert.deepEqual(left.map((job) => job.id), [], 'no run of it is left in BullMQ');
    } finally {
      await queue.close();
    }
    assert.equal(await admin.schedules.get('removed'), undefined);
  });

  it('re-created after a removal, it owes no tick of the time it did not exist (bullmq #3063)', { timeout: 60_000 }, async () => {
    await admin.schedules.upsert('recreated', { job: 'record', every: '1s' });
    await until('a run', async () => (await runsOf(redis.client, 'recreated')).length >= 1, 30_000);
    await admin.schedules.remove('recreated');
    const removedAt = Date.now();
    await sleep(3_000);
    await admin.schedules.upsert('recreated', { job: 'record', every: '1s' });
    const writtenAt = Date.parse((await admin.schedules.get('recreated'))!.createdAt);
    await until('runs again', async () => (await runsOf(redis.client, 'recreated')).some(([tick]) => tick > writtenAt), 30_000);
    // The catch-up policy (latest, within 5 min) would have run the newest tick of the gap at once.
    const fromTheGap = (await runsOf(redis.client, 'recreated')).filter(([tick]) => tick > removedAt + 500 && tick <= writtenAt);
    assert.deepEqual(fromTheGap, [], 'no tick of the time it did not exist ran');
  });

  it('at runs once at its instant; pause with a note skips ticks as paused until resume', { timeout: 60_000 }, async () => {
    const at = Date.now() + 2_000;
    await admin.schedules.upsert('one-shot', { job: 'record', at });
    await until('the one-shot run', async () => (await runsOf(redis.client, 'one-shot')).length === 1, 30_000);
    assert.deepEqual((await runsOf(redis.client, 'one-shot')).map(([tick]) => tick), [at]);

    await admin.schedules.upsert('paused', { job: 'record', every: '1s' });
    await until('a run', async () => (await runsOf(redis.client, 'paused')).length >= 1, 30_000);
    await admin.schedules.pause('paused', 'tenant suspended');
    const view = await admin.schedules.get('paused');
    assert.deepEqual([view?.paused, view?.pauseNote], [true, 'tenant suspended']);
    await until('a tick skipped as paused', async () => ((await ledger().jobState('paused')).skipped.paused ?? 0) >= 2, 30_000);
    const before = (await runsOf(redis.client, 'paused')).length;
    assert.equal(await admin.schedules.resume('paused'), true);
    await until('runs again', async () => (await runsOf(redis.client, 'paused')).length > before, 30_000);
    const description = await admin.schedules.describe('paused', { ticks: 3 });
    assert.equal(description.next.length, 3);
    assert.ok(description.skipped.paused! >= 2);
    assert.ok(description.runs.length > 0);
  });

  it('a schedule whose job type leaves jobs/ stays stored, shown as orphaned, its ticks skipped as no-handler', { timeout: 60_000 }, async () => {
    await admin.schedules.upsert('orphan', { job: 'doomed', every: '1s' });
    await until('a run', async () => (await runsOf(redis.client, 'orphan')).length >= 1, 30_000);
    await unlink(join(dir, 'doomed.mjs'));
    await until('a tick skipped as no-handler', async () => ((await ledger().jobState('orphan')).skipped['no-handler'] ?? 0) >= 2, 30_000);
    const seen = await schedulers[0]!.schedules.get('orphan');
    assert.equal(seen?.problem?.kind, 'orphaned');
    assert.equal((await admin.schedules.get('orphan'))?.problem?.kind, 'orphaned');

    // describe, from a client and from each instance, shows the problem and counts the skipped ticks.
    for (const schedules of [admin.schedules, ...schedulers.map((s) => s.schedules)]) {
      const description = await schedules.describe('orphan');
      assert.deepEqual([description.version, description.spec.job, description.spec.every], [1, 'doomed', '1s'], 'it stays stored as written');
      assert.equal(description.problem?.kind, 'orphaned');
      assert.match(description.problem.detail, /^its job type "doomed" is not defined in jobs\/: its ticks are skipped as no-handler$/);
      assert.ok((description.skipped['no-handler'] ?? 0) >= 2, JSON.stringify(description.skipped));
    }
    // Each further tick under the running leader is counted as one more.
    const counted = (await admin.schedules.describe('orphan')).skipped['no-handler']!;
    await until('another tick skipped as no-handler', async () => ((await admin.schedules.describe('orphan')).skipped['no-handler'] ?? 0) > counted, 30_000);
  });

  it('history says who wrote, paused and removed a schedule; a write of the same spec is no event', { timeout: 30_000 }, async () => {
    await admin.schedules.upsert('audited', { job: 'record', every: '1h' }, { by: 'erin (http)' });
    await admin.schedules.upsert('audited', { job: 'record', every: '1h' }, { by: 'frank@ops' });
    await admin.schedules.upsert('audited', { job: 'record', every: '2h' });
    await admin.schedules.pause('audited', 'tenant offboarding', { by: 'grace@ops' });
    assert.equal(await admin.schedules.remove('audited'), true);
    assert.deepEqual((await admin.history('audited')).map(({ action, by, detail }) => [action, by, detail.version ?? detail.note]), [
      ['remove', 'test@ci', 2],
      ['pause', 'grace@ops', 'tenant offboarding'],
      ['upsert', 'test@ci', 2],
      ['upsert', 'erin (http)', 1],
    ]);
  });

  it('refuses bad input with one line per problem and writes nothing', async () => {
    const count = (await admin.schedules.list({ limit: 1000 })).total;
    await assert.rejects(admin.schedules.upsert('bad', { job: 'nope', schedule: '* * * * * * *' }), (e: unknown) => {
      assert.ok(e instanceof ScheduleError);
      assert.equal(e.code, 'invalid');
      assert.match(e.errors[0]!, /^schedule "bad": job "nope": unknown job type/);
      return true;
    });
    await assert.rejects(admin.schedules.upsert('record', { job: 'record', every: '1m' }), (e: unknown) => e instanceof ScheduleError && e.code === 'name-taken');
    await assert.rejects(admin.schedules.describe('missing'), (e: unknown) => e instanceof ScheduleError && e.code === 'not-found');
    assert.equal((await admin.schedules.list({ limit: 1000 })).total, count);
  });

  it('lists in id order, page by page, filtered by job type and by search', async () => {
    for (let i = 0; i < 25; i++) await admin.schedules.upsert(`page-${String(i).padStart(2, '0')}`, { job: 'record', every: '1h' });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await admin.schedules.list({ search: 'page-', limit: 10, ...(cursor ? { cursor } : {}) });
      seen.push(...page.schedules.map((s) => s.id));
      cursor = page.cursor;
    } while (cursor);
    assert.deepEqual(seen, Array.from({ length: 25 }, (_, i) => `page-${String(i).padStart(2, '0')}`));
    const records = await admin.schedules.list({ job: 'record', limit: 1000 });
    assert.ok(records.schedules.every((s) => s.spec.job === 'record'));
  });
});
