import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAdmin, type Admin } from '../../src/index.js';
import { MAX_SCANNED } from '../../src/admin/schedules.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { LOOKAHEAD_MS } from '../../src/scheduling/plan.js';
import { checkScheduleSpec } from '../../src/schedules/spec.js';
import { useRedis } from '../support/redis-server.js';
import { seedSchedules } from '../support/schedule-bulk.js';
import { scheduledJob } from '../support/scheduled-job.js';

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const handler = (): undefined => undefined;
const types = new Map<string, ScheduledJob>([['report', { ...scheduledJob({ name: 'report', handler }), trigger: { kind: 'none' } }]]);
const errorsOf = (spec: Record<string, unknown>): string[] => {
  const result = checkScheduleSpec('rare', { job: 'report', ...spec }, types, NOW);
  return result.ok ? [] : result.errors;
};

describe('a spec costs a bounded walk of its calendar, and one that never runs is refused', () => {
  it('a limit whose last tick is beyond the 10-year lookahead is refused, naming the cap, not walked for seconds', () => {
    // 10,000 ticks of 29 February span 40,000 years: the old check walked them all, then blamed endAt.
    assert.deepEqual(errorsOf({ schedule: '0 0 29 2 *', limit: 10_000 }), [
      'schedule "rare": limit 10000: its last tick would come after 2036-12-01, more than 10 years ahead (as far as leasebeat plans); lower the limit, or end the schedule with endAt',
    ]);
    const fits = checkScheduleSpec('rare', { job: 'report', schedule: '0 0 29 2 *', limit: 2 }, types, NOW);
    assert.ok(fits.ok);
    assert.equal(fits.spec.limitEndsAt, Date.UTC(2032, 1, 29));
  });

  it('a cron with no tick in 8 years is refused, by the full check and by the shape cache alike', () => {
    const refusal = [
      'schedule "rare": schedule: it has no tick in the 8 years after 2026-12-01 and would never run; check its day-of-month, month and day-of-week fields (say, a 5th Monday in February, or 30 February)',
    ];
    // The first write of a shape compiles it; the second would be served from the cache if it had been kept.
    assert.deepEqual(errorsOf({ schedule: '0 0 * 2 1#5' }), refusal);
    assert.deepEqual(errorsOf({ schedule: '0 0 * 2 1#5' }), refusal);
    assert.deepEqual(errorsOf({ schedule: '0 0 * 2 1#5', limit: 3 }), refusal);
    assert.deepEqual(errorsOf({ schedule: '0 0 29 2 *' }), [], 'a rare cron that fires within 8 years is accepted');
  });

  it('an endAt before the first tick is refused as a schedule that never runs', () => {
    assert.deepEqual(errorsOf({ schedule: '0 0 29 2 *', endAt: '2027-06-01T00:00:00.000Z' }), [
      'schedule "rare": endAt: it has no tick from 2026-12-01T12:00:00.000Z to its endAt 2027-06-01T00:00:00.000Z and would never run; move endAt later',
    ]);
  });
});

describe('describe and list answer with a bounded walk and a bounded read (real Redis)', () => {
  const redis = useRedis();
  let dir: string;
  let admin: Admin;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-bounded-'));
    await writeFile(join(dir, 'report.mjs'), 'export default { name: "report", handler: () => undefined };\n');
    await writeFile(join(dir, 'leap.mjs'), 'export default { name: "leap", schedule: "0 0 29 2 *", handler: () => undefined };\n');
    admin = createAdmin({ connection: redis.server.url, jobsDir: dir, who: 'test@ci' });
  });
  redis.beforeClose(() => admin.close());
  after(() => rm(dir, { recursive: true, force: true }));

  const idOf = (i: number): string => `t${String(i).padStart(5, '0')}`;
  const withinLookahead = (ticks: string[]): void => {
    const horizon = Date.now() + LOOKAHEAD_MS;
    assert.ok(ticks.length >= 2 && ticks.length <= 3, `the 29ths of February in 10 years: ${ticks.join(', ')}`);
    for (const tick of ticks) assert.ok(Date.parse(tick) <= horizon, `${tick} is beyond the lookahead`);
  };

  it("a describe asking for thousands of a rare cron's ticks lists those of the next 10 years", async () => {
    await admin.schedules.upsert('leap-tenant', { job: 'report', schedule: '0 0 29 2 *' });
    withinLookahead((await admin.schedules.describe('leap-tenant', { ticks: 2_000 })).next);
    withinLookahead((await admin.describe('leap', { ticks: 2_000 })).nextTicks);
    const every = await admin.schedules.upsert('each-second', { job: 'report', every: '1s' });
    assert.ok(every.id);
    assert.equal((await admin.schedules.describe('each-second', { ticks: 3_000_000 })).next.length, 1_000, 'at most 1,000 ticks');
  });

  it('a filtered list that matches nothing reads a bounded stretch of ids per page and hands on a cursor', async () => {
    const spec = await admin.schedules.check('t', { job: 'report', every: '1h' });
    await seedSchedules(redis.client, MAX_SCANNED + 500, (i) => ({ id: idOf(i), spec }));
    const first = await admin.schedules.list({ job: 'nothing-of-this-type', limit: 100 });
    assert.deepEqual(first.schedules, []);
    assert.ok(first.cursor, 'an early end says where to go on');
    const second = await admin.schedules.list({ job: 'nothing-of-this-type', limit: 100, cursor: first.cursor });
    assert.deepEqual(second.schedules, []);
    assert.equal(second.cursor, undefined, 'the ids ended within the second stretch');
    // A match beyond the first stretch is found by following the cursor.
    const wanted = idOf(MAX_SCANNED + 400);
    const searched = await admin.schedules.list({ search: wanted, limit: 10 });
    assert.deepEqual(searched.schedules, []);
    const found = await admin.schedules.list({ search: wanted, limit: 10, cursor: searched.cursor });
    assert.deepEqual(found.schedules.map((s) => s.id), [wanted]);
  });
});
