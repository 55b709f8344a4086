import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { createAdmin, type Admin, type ScheduleView } from '../../src/index.js';
import type { StoredSpec } from '../../src/schedules/spec.js';
import { MAX_SCANNED } from '../../src/admin/schedules.js';
import { screenshot } from '../support/browser.js';
import { freePort, useRedis } from '../support/redis-server.js';
import { seedSchedules } from '../support/schedule-bulk.js';
import { SCHEDULE_JOBS } from '../support/schedule-instance.js';
import { openStatusBrowser, SchedulesSection, unexpected, type StatusBrowser } from '../support/schedules-page.js';
import { fixedSource } from './fixture.js';

const COUNT = 100_000;
/** Two more that sort before every tenant: a file job's name (shadowed) and a job type that is gone (orphaned). */
const TOTAL = COUNT + 2;
const tenant = (i: number): string => `tenant-${String(i).padStart(6, '0')}`;
/**
 * First rows from navigation start. The page makes one list request of 50 rows (a few ms on 100,000
 * schedules) after its own load: 2 s is what a person waits before calling a page slow, and leaves a
 * slow CI runner ten times what this takes here.
 */
const FIRST_PAGE_MS = 2_000;

/**
 * The status page's Schedules section on 100,000 runtime schedules in a real Redis, through the admin API
 * the CLI uses (no instance runs them: the page is what is under test, and no leader means no ticks).
 */
describe('the status page schedules on 100,000 schedules, in a real browser', () => {
  const redis = useRedis();
  let admin: Admin;
  let open: StatusBrowser;
  let section: SchedulesSection;
  let seedMs = 0;

  before(async () => {
    admin = createAdmin({ connection: redis.server.url, jobsDir: SCHEDULE_JOBS, timeoutMs: 2_000 });
    // The stored form from the API's own check, so the bulk writes hold what an upsert would.
    const shapes: StoredSpec[] = await Promise.all([
      admin.schedules.check('shape', { job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Berlin' }),
      admin.schedules.check('shape', { job: 'report', every: '1h' }),
      admin.schedules.check('shape', { job: 'work', schedule: '30 6 * * 1-5', timezone: 'America/New_York', note: 'weekday mornings' }),
    ]);
    const seeded = await seedSchedules(redis.client, COUNT, (i) => ({ id: tenant(i), spec: { ...shapes[i % 3]!, data: { tenant: i } } }), { inFlight: 64 });
    seedMs = seeded.ms;
    await seedSchedules(redis.client, 2, (i) => (i === 0 ? { id: 'nightly', spec: shapes[0]! } : { id: 'orphan-1', spec: { ...shapes[1]!, job: 'gone' } }));
    open = await openStatusBrowser(Object.assign(fixedSource([]), { admin }));
    section = new SchedulesSection(open.page);
  });
  redis.beforeClose(async () => {
    await open?.close();
    await admin?.close();
  });

  it(`renders the first page within ${FIRST_PAGE_MS} ms of navigation, with one list request and no request per row`, async () => {
    console.log(`seeded ${COUNT} schedules through ScheduleStore.upsert, 64 in flight, in ${seedMs} ms`);
    await open.page.goto(open.server.url + '/');
    // Polled on each animation frame, in the page (a function: the CSP refuses a string to evaluate).
    const firstPageMs = await (
      await open.page.waitForFunction(() => {
        const { document } = globalThis as unknown as { document: { querySelectorAll(selector: string): { length: number } } };
        return document.querySelectorAll('#schedules-table tr.schedule').length === 50 ? performance.now() : 0;
      })
    ).jsonValue();
    const [html, list] = await open.page.evaluate(() => {
      const entries = performance.getEntries() as unknown as Array<{ name: string; entryType: string; startTime: number; responseEnd: number }>;
      return [entries.find((e) => e.entryType === 'navigation')!, entries.find((e) => e.name.includes('/api/schedules'))!].map((e) => [Math.round(e.startTime), Math.round(e.responseEnd)]);
    });
    console.log(`first page of ${TOTAL} schedules on screen ${Math.round(firstPageMs)} ms after navigation start ` +
      `(the page's HTML by ${html![1]} ms; its list request ${list![0]}–${list![1]} ms)`);
    assert.ok(firstPageMs < FIRST_PAGE_MS, `${firstPageMs} ms`);

    assert.deepEqual(section.requests.map((r) => r.url().replace(open.server.url, '')), ['/api/schedules?limit=50']);
    assert.match(await section.root.locator('h2').innerText(), /^Schedules \(100,002\)/);
    assert.equal(await open.page.locator('#schedules-where').innerText(), 'page 1 · 1–50 of 100,002');
    assert.deepEqual((await section.ids()).slice(0, 4), ['nightly', 'orphan-1', tenant(0), tenant(1)]);

    const shadowed = await section.row('nightly').locator('td').allInnerTexts();
    assert.match(shadowed[6]!, /^shadowed\s+the file job "nightly" \(.*nightly\.js\) has the same name and runs instead/);
    assert.equal(await section.row('nightly').locator('td').nth(6).locator('.badge.warn').count(), 1);
    assert.match((await section.row('orphan-1').locator('td').allInnerTexts())[6]!, /^orphaned\s+its job type "gone" is not defined/);
    assert.match((await section.row('orphan-1').getAttribute('class'))!, /\bproblem-orphaned\b/);

    const cells = await section.row(tenant(2)).locator('td').allInnerTexts();
    assert.match(cells[0]!, /^tenant-000002\s+weekday mornings$/);
    assert.deepEqual(cells.slice(1, 5), ['work', '30 6 * * 1-5\nAmerica/New_York', 'active', '1']);
    assert.match(cells[5]!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+\d+ s ago\s+by seed@test$/);
    assert.equal(cells[6], '—');
    assert.deepEqual(unexpected(open.watched.problems), []);
    assert.deepEqual(open.watched.external, []);
  });

  it('pages forward and back through the cursor stack', async () => {
    const from = section.requests.length;
    const [next, prev] = [open.page.locator('#schedules-next'), open.page.locator('#schedules-prev')];
    assert.equal(await prev.isDisabled(), true);
    await next.click();
    await section.showing(tenant(48), 50);
    assert.equal(await open.page.locator('#schedules-where').innerText(), 'page 2 · 51–100 of 100,002');
    await next.click();
    await section.showing(tenant(98), 50);
    await prev.click();
    await section.showing(tenant(48), 50);
    await prev.click();
    await section.showing('nightly', 50);
    assert.equal(await prev.isDisabled(), true);
    assert.deepEqual(section.listQueries(from).map((q) => q.get('cursor')), [tenant(47), tenant(97), tenant(47), null]);
  });

  it('sends the search and the job-type filter to the API, debounced, and finds one id among 100,000', async () => {
    const from = section.requests.length;
    const search = open.page.locator('#schedule-search');
    // Six keystrokes' input events in one task of the page, so no timer can run between them however loaded
    // the machine is (typed with delays, a stalled browser spaced keys past the debounce: two requests).
    await search.evaluate((input: { value: string; dispatchEvent(event: unknown): boolean }, text) => {
      for (let i = 1; i <= text.length; i++) {
        input.value = text.slice(0, i);
        input.dispatchEvent(new Event('input', { bubbles: true }));
      }
    }, '077777');
    const typed = performance.now();
    await section.showing(tenant(77777), 1);
    const shownMs = Math.round(performance.now() - typed);
    // One search once typing paused, read on from its cursor: each answer covers a bounded stretch of ids
    // (MAX_SCANNED, so that no request holds the leader), the page asks until it has its match and the ids end.
    const queries = section.listQueries(from);
    assert.equal(queries[0]?.toString(), 'limit=50&search=077777', 'the first request, once typing paused');
    assert.ok(queries.length <= Math.ceil(100_000 / MAX_SCANNED) + 1, `${queries.length} requests`);
    assert.ok(queries.slice(1).every((q) => q.get('search') === '077777' && q.get('cursor') !== null), queries.map(String).join(' | '));
    const { requestStart, responseEnd } = section.requests.at(-1)!.timing();
    console.log(`search "077777": its one row on screen ${shownMs} ms after the last key (300 ms of it the debounce; the API scan ${Math.round(responseEnd - requestStart)} ms)`);
    assert.equal(await open.page.locator('#schedules-next').isDisabled(), true);
    assert.equal(await open.page.locator('#schedules-where').innerText(), 'page 1 · 1–1 of the matches');

    await search.fill('no-such-id');
    await section.root.locator('.empty', { hasText: 'No schedule has an id containing "no-such-id".' }).waitFor();
    await search.fill('');
    await open.page.locator('#schedule-job').fill('report');
    await open.page.locator('#schedule-job').press('Enter');
    await section.showing(tenant(1), 50);
    const types = await section.rows.evaluateAll((rows) => rows.map((row) => (row as unknown as { cells: Array<{ innerText: string }> }).cells[1]!.innerText));
    assert.deepEqual(new Set(types), new Set(['report']));
    assert.deepEqual(section.listQueries(from).at(-1)?.toString(), 'limit=50&job=report');
    await open.page.locator('#schedule-job').fill('');
    await section.showing('nightly', 50);
  });

  it('opens a row: describe once, next ticks in its time zone, runs and skip counts', async () => {
    await open.page.locator('#schedule-search').fill('077777');
    await section.showing(tenant(77777), 1);
    const from = section.requests.length;
    const detail = await section.open(tenant(77777));
    // The section's own refresh (every 5 s: the list, then the open row's describe) may come in between
    // on a loaded machine: what the opening made is what came before it.
    const made = section.requests.slice(from).map((r) => new URL(r.url()).pathname);
    const refresh = made.indexOf('/api/schedules');
    assert.deepEqual(refresh < 0 ? made : made.slice(0, refresh), [`/api/schedules/${tenant(77777)}/describe`]);
    const ticks = await detail.locator('#schedule-next li').allInnerTexts();
    assert.equal(ticks.length, 5);
    // 06:30 in New York, on weekdays: in UTC 11:30, or 10:30 in daylight-saving time.
    for (const tick of ticks) assert.match(tick, /^\d{4}-\d\d-\d\d 06:30 GMT-[45]\s+\d{4}-\d\d-\d\d 1[01]:30:00Z · in /, tick);
    const text = await detail.innerText();
    assert.match(text, /Time zone\s+America\/New_York/);
    assert.match(text, /Data\s+\{\s*"tenant": 77777\s*\}/);
    assert.match(text, /Skipped\s+none/);
    assert.match(text, /Version\s+v1 · \d{4}-\d\d-\d\d [\d:]+Z\s+\d+ s ago\s+by seed@test\s+Created\s+\d{4}-/);
    assert.match(await detail.locator('#schedule-runs').innerText(), /No run recorded yet\./);
  });

  it('pauses with a note from the page, which the API then shows; resumes; a trigger no leader takes says why in one line', async () => {
    const id = tenant(77777);
    const note = 'offboarding <b>tenant</b> 77777';
    const detail = open.page.locator('#schedule-detail');
    await open.page.locator('#schedule-note').fill(note);
    const posted = open.page.waitForRequest((r) => r.method() === 'POST');
    await detail.locator('button[data-action="pause"]').click();
    const request = await posted;
    await open.page.locator('#schedule-action-result', { hasText: 'Paused' }).waitFor();

    // What the origin check and the JSON-only rule look at, as the browser sent it.
    const headers = await request.allHeaders();
    assert.equal(headers.origin, open.server.url);
    assert.equal(headers['sec-fetch-site'], 'same-origin');
    assert.equal(headers['content-type'], 'application/json');
    assert.deepEqual(request.postDataJSON(), { note });

    const view = (await (await open.page.request.get(`${open.server.url}/api/schedules/${id}`)).json()) as ScheduleView;
    assert.deepEqual([view.paused, view.pauseNote], [true, note]);
    await detail.locator('#schedule-state', { hasText: note }).waitFor();
    // The table was read again after the pause; the note is text, never markup.
    await section.row(id).locator('td').nth(3).locator('.pause-note', { hasText: note }).waitFor();
    assert.match(await section.row(id).locator('td').nth(3).innerText(), /^paused\s+offboarding <b>tenant<\/b> 77777$/);
    assert.equal(await open.page.locator('#schedules b').count(), 0);
    // The detail stays open over a new filter: the first page of all, beside the paused schedule.
    await open.page.locator('#schedule-search').fill('');
    await section.showing('nightly', 50);
    await screenshot(open.page, 'screenshots/status-schedules');

    await detail.locator('button[data-action="resume"]').click();
    await open.page.locator('#schedule-action-result', { hasText: 'Resumed.' }).waitFor();
    assert.equal((await admin.schedules.get(id))?.paused, false);
    await detail.locator('#schedule-state', { hasText: 'active' }).waitFor();

    await detail.locator('button[data-action="trigger"]').click();
    await open.page.locator('#schedule-action-result.bad', { hasText: /^trigger failed: no leader took request .* it will not run/ }).waitFor({ timeout: 10_000 });
    assert.deepEqual(unexpected(open.watched.problems, 504), []);
  });

  it('with no schedules shows the empty state, and with the API failing one line, the rest of the page intact', async () => {
    const empty = createAdmin({ connection: redis.server.url, prefix: 'no-schedules', jobsDir: SCHEDULE_JOBS });
    const down = createAdmin({ connection: `redis://127.0.0.1:${await freePort()}`, jobsDir: SCHEDULE_JOBS, timeoutMs: 500 });
    const opened: StatusBrowser[] = [];
    try {
      const emptyPage = await openStatusBrowser(Object.assign(fixedSource([]), { admin: empty }));
      opened.push(emptyPage);
      await emptyPage.page.goto(emptyPage.server.url + '/');
      await emptyPage.page.locator('#schedules-table .empty', { hasText: /^No runtime schedules\. Create one with leasebeat schedules upsert/ }).waitFor();
      assert.match(await emptyPage.page.locator('#schedules h2').innerText(), /^Schedules \(0\)/);
      assert.deepEqual(emptyPage.watched.problems, []);

      const failing = await openStatusBrowser(Object.assign(fixedSource([]), { admin: down }));
      opened.push(failing);
      await failing.page.goto(failing.server.url + '/');
      const line = failing.page.locator('#schedules-error');
      await line.waitFor();
      assert.match(await line.innerText(), /^Schedules could not be read: \S.*$/);
      console.log(`with the admin's Redis down the section says: ${await line.innerText()}`);
      assert.match(await failing.page.locator('main').innerText(), /Jobs \(2\)[\s\S]*nightly-report/, 'the rest of the page renders');
      assert.equal(await failing.page.locator('#outage').count(), 0, 'a schedules failure is not an outage of the status');
      assert.deepEqual(unexpected(failing.watched.problems, 500, 503, 504), []);

      // Read-only: the rows and the detail, without actions.
      const readOnly = await openStatusBrowser(Object.assign(fixedSource([]), { admin }), { readOnly: true });
      opened.push(readOnly);
      await readOnly.page.goto(readOnly.server.url + '/');
      const readOnlySection = new SchedulesSection(readOnly.page);
      await readOnlySection.showing('nightly', 50);
      const detail = await readOnlySection.open('nightly');
      assert.equal(await detail.locator('button[data-action]').count(), 0);
      assert.match(await detail.innerText(), /This server is read-only/);
      assert.match(await detail.locator('#schedule-problem').innerText(), /^shadowed the file job "nightly"/);
    } finally {
      await Promise.all(opened.map((o) => o.close()));
      await Promise.all([empty.close(), down.close()]);
    }
  });
});
