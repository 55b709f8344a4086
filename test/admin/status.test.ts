import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { createAdmin, formatJobLine, type Admin, type AdminJobStatus } from '../../src/admin/admin.js';
import { createScheduler, type Scheduler } from '../../src/scheduler.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('../serving/fixtures/jobs-ticking/', import.meta.url).pathname;

describe('status of a job whose ticks are staged ahead of their due time', () => {
  const redis = useRedis();
  let scheduler: Scheduler;
  let admin: Admin;

  before(async () => {
    // every-second is staged 2 s ahead (the default): the ledger records each tick before it is due.
    scheduler = createScheduler({ connection: redis.server.url, jobsDir: JOBS, identity: 'stager', election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 } });
    await scheduler.start();
    admin = createAdmin({ connection: redis.server.url, jobsDir: JOBS, timeoutMs: 10_000 });
  });
  redis.beforeClose(async () => {
    await admin?.close();
    await scheduler?.stop();
  });

  it('shows the last tick due and, apart, the staged ones: never a "last" in the future', { timeout: 60_000 }, async () => {
    const job = await until('a tick due and one staged', async () => {
      const row = (await admin.status()).jobs.find((entry) => entry.name === 'every-second');
      return row?.lastTick && row.staged.length > 0 ? row : undefined;
    });
    const read = Date.now();
    assert.ok(Date.parse(job.lastTick!) <= read, `last ${job.lastTick} lies after the read at ${new Date(read).toISOString()}`);
    assert.equal(job.lastJobId, `every-second@${Date.parse(job.lastTick!)}`, "the last due tick's own run");
    assert.ok(job.staged.every((tick) => tick > job.lastTick!), JSON.stringify(job));
    assert.ok(job.next! > job.lastTick!, 'next and last differ');
    const line = formatJobLine(job);
    assert.match(line, new RegExp(`^every-second {2}next \\S+ {2}last ${job.lastTick} every-second@\\d+ {2}staged ${job.staged[0]}( \\(\\+\\d+\\))? {2}enqueued \\d+ `));
  });

  it('without staged ticks, last is the watermark as before', () => {
    const row: AdminJobStatus = {
      name: 'nightly', queue: null, schedule: null, timezone: null, next: null, paused: false, pauseNote: null,
      lastTick: '2026-01-01T02:30:00.000Z', lastJobId: 'nightly@1767234600000', staged: [], enqueued: 3, skipped: {}, fenced: 0,
    };
    assert.equal(formatJobLine(row), 'nightly  next -  last 2026-01-01T02:30:00.000Z nightly@1767234600000  enqueued 3 skipped {} fenced 0');
  });
});
