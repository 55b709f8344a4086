import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { screenshot } from '../support/browser.js';
import { useRedis } from '../support/redis-server.js';
import { useScheduleInstance } from '../support/schedule-instance.js';
import { BOARD_USER, openStatusBrowser, type StatusBrowser } from '../support/schedules-page.js';
import { until } from '../support/until.js';

const JOBS = new URL('../fixtures/jobs-describe/', import.meta.url).pathname;
const HOSTILE_NOTE = 'db migration <img src=x onerror=alert(1)>';

/**
 * A job's own page on a running, leading instance (its HTTP server as `leasebeat start` serves it): what
 * `leasebeat describe` says, and the actions, carried out by the leader and recorded as the board user's.
 */
describe('the per-job page of a running instance, in a real browser', () => {
  const redis = useRedis();
  const instance = useScheduleInstance(redis, { jobsDir: JOBS });
  let open: StatusBrowser;

  before(async () => {
    open = await openStatusBrowser(instance.scheduler);
    // A few runs finished first: the page has durations, lags and a runner to show.
    await until('three runs of pulse completed', async () => (await instance.scheduler.admin.runs('pulse', { limit: 10 })).filter((run) => run.state === 'completed').length >= 3, 30_000);
  });
  redis.beforeClose(() => open?.close());

  it('shows the job as describe does: its definition hash, next ticks, and each run with duration, lag, instance and term', { timeout: 60_000 }, async () => {
    const { page } = open;
    await page.goto(open.server.url + '/');
    // The status page links each job to its page.
    await page.locator('tr.job[data-job="pulse"] a[href="/jobs/pulse"]').click();
    await page.locator('#job-name', { hasText: 'pulse' }).waitFor();
    const described = await instance.scheduler.admin.describe('pulse');
    assert.equal(await page.locator('#job-definition').innerText(), described.definition);
    assert.equal(await page.locator('#next-ticks li').count(), 10);
    const completed = page.locator('tr.run', { hasText: 'completed' }).first();
    await completed.waitFor();
    const cells = await completed.locator('td').allInnerTexts();
    assert.match(cells[1]!, /^enqueued/);
    assert.match(cells[2]!, /^pulse@\d+$/);
    assert.match(cells[5]!, /^\d+(\.\d)? (ms|s)$/, `its duration: ${cells[5]}`);
    assert.match(cells[6]!, /^\d+(\.\d)? (ms|s)$/, `its lag: ${cells[6]}`);
    assert.equal(cells[8], 'schedules-instance', 'the instance that ran it');
    assert.match(cells[9]!, /^.+\/\d+$/, `the term that enqueued it: ${cells[9]}`);
    assert.equal(cells[10], described.definition, 'decided by the definition loaded now');
    assert.deepEqual(open.watched.problems, []);
    assert.deepEqual(open.watched.external, []);
  });

  it('pauses with a note (shown as text), resumes and triggers: the leader acts, the history names the board user', { timeout: 60_000 }, async () => {
    const { page } = open;
    await page.goto(open.server.url + '/jobs/pulse');
    await page.locator('#job-name', { hasText: 'pulse' }).waitFor();
    await page.locator('#pause-note').fill(HOSTILE_NOTE);
    await page.locator('#pause').click();
    await page.locator('#action-result', { hasText: 'Paused, with the note shown above.' }).waitFor();
    await page.locator('#job-state .pause-note', { hasText: HOSTILE_NOTE }).waitFor();
    const status = (await instance.scheduler.admin.status()).jobs.find((job) => job.name === 'pulse');
    assert.deepEqual([status?.paused, status?.pauseNote], [true, HOSTILE_NOTE]);

    await page.locator('#resume').click();
    await page.locator('#action-result', { hasText: 'Resumed.' }).waitFor();
    assert.equal((await instance.scheduler.admin.status()).jobs.find((job) => job.name === 'pulse')?.paused, false);

    await page.locator('#trigger').click();
    const triggered = await page.locator('#action-result', { hasText: /^Triggered: pulse@manual-/ }).innerText();
    const jobId = /^Triggered: (\S+)/.exec(triggered)![1]!;
    await until('the manual run to complete', async () => (await instance.scheduler.admin.runs('pulse', { limit: 50 })).some((run) => run.jobId === jobId && run.state === 'completed'), 30_000);
    await page.reload();
    await page.locator('tr.run', { hasText: jobId }).filter({ hasText: 'manual' }).waitFor();

    const actions = (await instance.scheduler.admin.history('pulse', { limit: 10 })).map((entry) => [entry.action, entry.by]);
    assert.deepEqual(actions.slice(0, 3), [['trigger', `${BOARD_USER} (http)`], ['resume', `${BOARD_USER} (http)`], ['pause', `${BOARD_USER} (http)`]]);
    assert.equal(await page.locator('img').count(), 0, 'the hostile note was never parsed as markup');
    assert.deepEqual(open.watched.problems, []);
  });

  it('backfills a range from the page: refused in one line when inverted, then run by the leader, its progress shown', { timeout: 60_000 }, async () => {
    const { page } = open;
    await page.goto(open.server.url + '/jobs/pulse');
    await page.locator('#job-name', { hasText: 'pulse' }).waitFor();
    // The ten seconds before the leader first scheduled pulse: no record, never run.
    const since = Number(await redis.client.hget('leasebeat:{leasebeat}:job:pulse', 'scheduledSince'));
    const to = Math.floor((since - 1) / 1000) * 1000;
    const from = to - 9_000;
    await page.locator('#backfill-from').fill(new Date(to).toISOString());
    await page.locator('#backfill-to').fill(new Date(from).toISOString());
    await page.locator('#backfill').click();
    await page.locator('#action-result.bad', { hasText: /^backfill refused: from: .* is after --to/ }).waitFor();
    assert.deepEqual(await instance.scheduler.admin.backfills('pulse'), [], 'nothing stored');

    await page.locator('#backfill-from').fill(new Date(from).toISOString());
    await page.locator('#backfill-to').fill(new Date(to).toISOString());
    await page.locator('#backfill-rate').fill('50');
    await page.locator('#backfill').click();
    await page.locator('#action-result.ok', { hasText: /^Backfill \S+ queued: 10 ticks/ }).waitFor();
    const row = page.locator('tr.backfill').first();
    await row.locator('.badge', { hasText: 'done' }).waitFor({ timeout: 30_000 });
    assert.match(await row.locator('td').nth(3).innerText(), /10\/10/);
    assert.equal(await row.locator('td').nth(4).innerText(), '10');
    const [backfill] = await instance.scheduler.admin.backfills('pulse');
    assert.deepEqual([backfill?.state, backfill?.enqueued, backfill?.by], ['done', 10, `${BOARD_USER} (http)`]);
    const [entry] = await instance.scheduler.admin.history('pulse', { limit: 1 });
    assert.deepEqual([entry?.action, entry?.by], ['backfill', `${BOARD_USER} (http)`]);
    // Its runs are among the job's newest, marked as the backfill's.
    await until('the backfill runs to complete', async () => (await instance.scheduler.admin.runs('pulse', { limit: 100 })).filter((run) => run.backfill === backfill?.id && run.state === 'completed').length === 10, 30_000);
    await page.reload();
    await page.locator('tr.run', { hasText: `pulse@${to}` }).filter({ hasText: 'backfill' }).waitFor();
    await screenshot(page, 'job-page');
    // Chromium logs the refusal's 400 itself; nothing else went wrong.
    assert.deepEqual(open.watched.problems, ['console: Failed to load resource: the server responded with a status of 400 (Bad Request)']);
  });

  it('says what is wrong for a name the cluster does not know', async () => {
    const { page } = open;
    await page.goto(open.server.url + '/jobs/no-such-job');
    await page.locator('#job-error', { hasText: /no job named "no-such-job"/ }).waitFor();
  });
});
