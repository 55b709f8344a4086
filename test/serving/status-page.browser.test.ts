import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { launchChromium, screenshot, watchPage } from '../support/browser.js';
import { fixedSource, LAST_JOB_ID, LEADER, sampleSnapshot, startQueueWorld, type FixedSource, type QueueWorld } from './fixture.js';

const USER = 'ops';
const PASSWORD = 's3cret pass';

describe('status page and Bull Board in a real browser', () => {
  let world: QueueWorld;
  let source: FixedSource;
  let server: HttpServerHandle;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let external: string[];

  before(async () => {
    world = await startQueueWorld();
    source = fixedSource([world.reports, world.cleanup]);
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      source,
      metrics: createMetrics(),
      board: { user: USER, password: PASSWORD },
    });
    browser = await launchChromium();
    context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1400, height: 900 } });
    page = await context.newPage();
    ({ problems, external } = watchPage(page, server.url));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
    await world?.close();
  });

  it('renders the cluster and the jobs from the snapshot, with hostile text shown as text', async () => {
    const response = await page.goto(server.url + '/');
    assert.equal(response?.status(), 200);
    await page.locator('#leader').filter({ hasText: LEADER }).waitFor();

    const row = page.locator('tr.job[data-job="nightly-report"]');
    const cells = await row.locator('td').allInnerTexts();
    assert.match(cells[0]!, /nightly-report\s+jobs\/nightly-report\.ts/);
    assert.equal(cells[1], 'reports');
    assert.match(cells[2]!, /^0 3 \* \* \*\s+Europe\/Berlin$/);
    assert.equal(await row.locator('td').nth(3).locator('time').count(), 3, 'the next three runs, not four');
    assert.match(cells[3]!, /^2026-01-02 02:00:00Z/);
    assert.equal(cells[6], '12');
    assert.match(cells[7]!, /^3\s+overlap 2, paused 1$/);
    assert.equal(cells[8], '1');
    assert.equal(cells[9], 'active');
    const link = row.locator('td').nth(5).locator('a');
    assert.equal(await link.innerText(), LAST_JOB_ID);
    assert.equal(await link.getAttribute('href'), `/admin/queues/queue/reports/${encodeURIComponent(LAST_JOB_ID)}`);

    const hostile = page.locator('tr.job').nth(1);
    assert.match(await hostile.innerText(), /<img src=x onerror=alert\(1\)>/);
    assert.match(await hostile.locator('td').nth(9).innerText(), /^paused\s+db migration <b>until<\/b> 14:00$/, "the pause's note, as text");
    assert.equal(await page.locator('img').count(), 0);
    assert.match(await page.locator('main').innerText(), /jobs\/broken\.ts\s+schedule: invalid cron expression "61 \* \* \* \*"/);
    assert.match(await page.title(), /^leasebeat · pod-a_4f1c$/);

    await screenshot(page, 'status-page');
    assert.deepEqual(problems, []);
    assert.deepEqual(external, []);
  });

  it('refreshes from /api/status without a reload', async () => {
    const next = sampleSnapshot();
    next.cluster.leader = 'pod-c_77aa';
    source.snapshot = next;
    await page.locator('#leader').filter({ hasText: 'pod-c_77aa' }).waitFor({ timeout: 15_000 });
    assert.deepEqual(problems, []);
  });

  it('with Redis down, still explains the outage: what does not answer and the checks of the instance, then recovers by itself', async () => {
    const down = 'connect ECONNREFUSED 127.0.0.1:6379';
    const saved = source.checks;
    source.snapshot = sampleSnapshot();
    source.statusFailure = new Error(down);
    source.checks = [{ name: 'redis', ok: false, required: false, detail: down }, { name: 'jobs', ok: true, detail: '2 loaded, 0 failed' }, { name: 'elector', ok: true }];
    try {
      const response = await page.goto(server.url + '/');
      assert.equal(response?.status(), 503);
      await page.locator('#outage').waitFor();
      assert.equal(await page.locator('#outage-problem').innerText(), down);
      assert.match(await page.locator('#outage tr[data-check="redis"]').innerText(), /^redis\s+failing\s+shown, not required for readiness\s+connect ECONNREFUSED/);
      assert.match(await page.locator('#outage').innerText(), /nothing is enqueued or run/);
      assert.equal((await page.request.get(server.url + '/readyz')).status(), 200, 'the instance stays ready, so this page stays reachable');
      await screenshot(page, 'status-page-outage');

      source.statusFailure = undefined;
      await page.locator('#leader').filter({ hasText: LEADER }).waitFor({ timeout: 15_000 });
      assert.equal(await page.locator('#outage').count(), 0, 'gone once the status answers');

      // Mid-view, the last state read stays on screen, under what does not answer now.
      source.statusFailure = new Error(down);
      await page.locator('#outage-problem').filter({ hasText: down }).waitFor({ timeout: 15_000 });
      assert.equal(await page.locator('#leader').innerText(), LEADER);
      // The browser logs each 503 it was answered (the page, /api/status): the outage itself, nothing else.
      assert.deepEqual(problems.filter((problem) => !problem.includes('the server responded with a status of 503')), []);
      problems.length = 0;
    } finally {
      source.statusFailure = undefined;
      source.checks = saved;
    }
  });

  it('opens the last job in Bull Board from its link', async () => {
    source.snapshot = sampleSnapshot();
    await page.goto(server.url + '/');
    await page.locator(`a:text-is("${LAST_JOB_ID}")`).click();
    await page.waitForURL(`**/admin/queues/queue/reports/**`);
    await page.getByText(LAST_JOB_ID).first().waitFor();
  });

  it('serves Bull Board with the queue names behind auth', async () => {
    const response = await page.goto(server.url + '/admin/queues');
    assert.equal(response?.status(), 200);
    await page.getByText('reports', { exact: true }).first().waitFor();
    await page.getByText('cleanup', { exact: true }).first().waitFor();
    await screenshot(page, 'board-queues');
    // Bull Board 9.x asks Google Fonts for IBM Plex: served without it, no request leaves this server.
    assert.deepEqual(external, []);
    assert.deepEqual(problems, []);

    // Without credentials the browser gets the Basic challenge, cannot answer it, and shows nothing.
    const anonymous = await browser.newContext();
    try {
      await assert.rejects((await anonymous.newPage()).goto(server.url + '/admin/queues'), /ERR_INVALID_AUTH_CREDENTIALS/);
    } finally {
      await anonymous.close();
    }
  });
});
