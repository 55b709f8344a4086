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
    await screenshot(page, 'job-page');

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

  it('says what is wrong for a name the cluster does not know', async () => {
    const { page } = open;
    await page.goto(open.server.url + '/jobs/no-such-job');
    await page.locator('#job-error', { hasText: /no job named "no-such-job"/ }).waitFor();
  });
});
