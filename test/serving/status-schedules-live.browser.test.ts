import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { ScheduleView } from '../../src/index.js';
import { useRedis } from '../support/redis-server.js';
import { seedSchedules } from '../support/schedule-bulk.js';
import { useScheduleInstance } from '../support/schedule-instance.js';
import { openStatusBrowser, SchedulesSection, unexpected, type StatusBrowser } from '../support/schedules-page.js';
import { until } from '../support/until.js';

/**
 * The Schedules section of a running, leading instance (its own HTTP server, as `leasebeat start` serves
 * it): problems as the instance judged them, and actions whose effects the leader and workers carry out.
 */
describe('the status page schedules of a running instance, in a real browser', () => {
  const redis = useRedis();
  const instance = useScheduleInstance(redis);
  let open: StatusBrowser;
  let section: SchedulesSection;

  before(async () => {
    open = await openStatusBrowser(instance.scheduler);
    section = new SchedulesSection(open.page);
  });
  redis.beforeClose(() => open?.close());

  it('with no schedule yet says so, and offers the job types in the job filter', async () => {
    await open.page.goto(open.server.url + '/');
    await section.root.locator('#schedules-table .empty', { hasText: /^No runtime schedules\./ }).waitFor();
    await until('the job types offered', async () => (await open.page.locator('#schedule-job-types option').count()) === 2);
    const offered = await open.page.locator('#schedule-job-types option').evaluateAll((options) => options.map((o) => (o as unknown as { value: string }).value));
    assert.deepEqual(offered.sort(), ['report', 'work'], 'the job types, not the scheduled file job');
    assert.deepEqual(open.watched.problems, []);
  });

  it('highlights what keeps a schedule from running: invalid as the instance compiled it, shadowed, orphaned', async () => {
    // Written as stored (no check): what a job type changing under its schedules leaves behind.
    const specs = { broken: { job: 'work', schedule: '61 * * * *' }, nightly: { job: 'work', every: '1h' }, lost: { job: 'gone', every: '1h' } };
    const ids = Object.keys(specs) as Array<keyof typeof specs>;
    await seedSchedules(redis.client, ids.length, (i) => ({ id: ids[i]!, spec: specs[ids[i]!] }));
    await until('the instance to judge "broken" invalid', async () => (await instance.scheduler.schedules.get('broken'))?.problem?.kind === 'invalid');

    await open.page.reload();
    await section.showing('broken', 3);
    const problem = async (id: string): Promise<[string, string]> => [
      (await section.row(id).getAttribute('class'))!,
      await section.row(id).locator('td').nth(6).innerText(),
    ];
    const [brokenClass, broken] = await problem('broken');
    assert.match(brokenClass, /\bproblem-invalid\b/);
    assert.match(broken, /^invalid\s+schedule "broken": schedule "61 \* \* \* \*"/);
    assert.equal(await section.row('broken').locator('.badge.bad').count(), 1, 'invalid is the red one');
    assert.match((await problem('nightly'))[1], /^shadowed\s+the file job "nightly"/);
    assert.match((await problem('lost'))[1], /^orphaned\s+its job type "gone" is not defined in jobs\/: its ticks are skipped as no-handler/);
    const detail = await section.open('broken');
    assert.match(await detail.locator('#schedule-problem').innerText(), /^invalid schedule "broken"/);
    assert.equal(await detail.locator('#schedule-next').innerText(), 'none: it does not run as written');
    for (const id of ids) await instance.scheduler.schedules.remove(id);
  });

  it('triggers from the page: the leader runs it, and the detail shows the run completed; next ticks in its zone', { timeout: 60_000 }, async () => {
    await instance.scheduler.schedules.upsert('live', { job: 'work', schedule: '0 12 * * *', timezone: 'Asia/Tokyo' });
    await instance.loaded('live');
    await open.page.reload();
    await section.showing('live', 1);
    const detail = await section.open('live');
    for (const tick of await detail.locator('#schedule-next li').allInnerTexts()) assert.match(tick, /^\d{4}-\d\d-\d\d 12:00 GMT\+9\s+\d{4}-\d\d-\d\d 03:00:00Z/);

    await detail.locator('button[data-action="trigger"]').click();
    const result = open.page.locator('#schedule-action-result.ok', { hasText: /^Triggered: live@manual-\S+ in queue leasebeat$/ });
    await result.waitFor({ timeout: 15_000 });
    const jobId = await result.locator('a').innerText();
    assert.equal(await result.locator('a').getAttribute('href'), `/admin/queues/queue/leasebeat/${encodeURIComponent(jobId)}`);
    // The detail is read again every 5 s: the run shows up, then finishes.
    await detail.locator('#schedule-runs tr.run[data-kind="manual"]', { hasText: 'completed' }).waitFor({ timeout: 20_000 });
    assert.match(await detail.locator('#schedule-runs tr.run[data-kind="manual"]').innerText(), new RegExp(`manual run\\s+completed\\s+${jobId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.deepEqual(open.watched.problems, []);
    await instance.scheduler.schedules.remove('live');
  });

  it('a ticking schedule: its ticks complete, a pause from the page holds them as skipped "paused", a trigger is refused in one line', { timeout: 60_000 }, async () => {
    await instance.scheduler.schedules.upsert('fast', { job: 'work', every: '1s' });
    try {
      await instance.loaded('fast');
      await open.page.reload();
      await section.showing('fast', 1);
      const detail = await section.open('fast');
      await detail.locator('#schedule-runs tr.run[data-kind="tick"]', { hasText: 'completed' }).first().waitFor({ timeout: 20_000 });

      await open.page.locator('#schedule-note').fill('load test over');
      await detail.locator('button[data-action="pause"]').click();
      await open.page.locator('#schedule-action-result.ok', { hasText: 'Paused' }).waitFor();
      const view = (await (await open.page.request.get(`${open.server.url}/api/schedules/fast`)).json()) as ScheduleView;
      assert.deepEqual([view.paused, view.pauseNote], [true, 'load test over']);
      await detail.locator('#schedule-skipped', { hasText: /\bpaused [1-9]/ }).waitFor({ timeout: 20_000 });
      await detail.locator('#schedule-runs', { hasText: 'skipped (paused)' }).waitFor();

      await detail.locator('button[data-action="trigger"]').click();
      await open.page.locator('#schedule-action-result.bad', { hasText: /^trigger failed: fast is paused/ }).waitFor({ timeout: 15_000 });
      await detail.locator('button[data-action="resume"]').click();
      await open.page.locator('#schedule-action-result.ok', { hasText: 'Resumed.' }).waitFor();
      assert.equal((await instance.scheduler.schedules.get('fast'))?.paused, false);
      assert.deepEqual(unexpected(open.watched.problems, 409), []);
    } finally {
      await instance.scheduler.schedules.remove('fast');
    }
  });
});
