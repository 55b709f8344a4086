import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import type { MemberStatus } from '../../src/members/status.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { launchChromium, screenshot, watchPage } from '../support/browser.js';
import { useRedis } from '../support/redis-server.js';
import { fixedSource, sampleSnapshot, seedHistory, type FixedSource, type SeededHistory } from './fixture.js';

const USER = 'ops';
const PASSWORD = 's3cret pass';

function member(identity: string, fields: Partial<MemberStatus>): MemberStatus {
  return {
    identity, role: 'follower', lastSeen: '', condition: 'Ready', reason: null, heartbeatAgeMs: 900, version: '0.1.0',
    startedAt: '2026-01-01T00:00:00.000Z', workers: 'running', activeJobs: 0, activeJobIds: [], activeJobsWhenUnknown: [],
    cordoned: false, cordonRequested: false, draining: false, ...fields,
  };
}

/** A computed style property of an element (evaluated in the page: the tests are compiled without the DOM types). */
async function computed(locator: Locator, property: string): Promise<string> {
  return locator.evaluate(
    (node, name) => (globalThis as unknown as { getComputedStyle(node: unknown): Record<string, string> }).getComputedStyle(node)[name]!,
    property,
  );
}

/** A page on another origin that posts a `text/plain` form to the board as soon as it loads: classic CSRF. */
async function startAttacker(target: string): Promise<{ url: string; server: Server }> {
  const html = `<!doctype html><form method="POST" action="${target}" enctype="text/plain">` +
    `<input name='{"name":"pwned","data":{},"x":"' value='"}'></form><script>document.forms[0].submit()</script>`;
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(html));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://localhost:${(server.address() as AddressInfo).port}/`, server };
}

describe('the status page history views and the hardened board, in a real browser', () => {
  const redis = useRedis();
  let seeded: SeededHistory;
  let source: FixedSource;
  let server: HttpServerHandle;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let watched: ReturnType<typeof watchPage>;
  let ops: Queue;

  before(async () => {
    seeded = await seedHistory(redis.server);
    ops = new Queue('ops', { connection: { host: '127.0.0.1', port: redis.server.port }, prefix: 'leasebeat-test' });
    source = fixedSource([ops]);
    const snapshot = sampleSnapshot();
    snapshot.instance.identity = 'pod-c';
    snapshot.instance.role = 'leader';
    snapshot.cluster.leader = 'pod-c';
    snapshot.cluster.disruption = 'Normal';
    snapshot.jobs = [...seeded.jobs, ...snapshot.jobs.slice(0, 1)];
    snapshot.cluster.members = [
      member('pod-c', { role: 'leader', activeJobs: 1, activeJobIds: ['ops/heartbeat@1'] }),
      member('pod-a', { heartbeatAgeMs: 1_400 }),
      // pod-b led, then died: its last record still says "leader".
      member('pod-b', { role: 'leader', condition: 'Unknown', heartbeatAgeMs: 17 * 60_000, activeJobsWhenUnknown: ['ops/heartbeat@2'] }),
    ];
    source.snapshot = snapshot;
    source.history = () => seeded.reader.read();
    server = await startHttpServer({ host: '127.0.0.1', port: 0, source, metrics: createMetrics(), board: { user: USER, password: PASSWORD } });
    browser = await launchChromium();
    context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1440, height: 900 } });
    page = await context.newPage();
    watched = watchPage(page, server.url);
  });
  redis.beforeClose(async () => {
    await browser?.close();
    await server?.close();
    await ops?.close();
    await seeded?.close();
  });

  it('shows a strip of recent ticks per job, coloured by fate, with the lag on hover, and a lag chart', async () => {
    await page.goto(server.url + '/');
    const strip = page.locator('tr.ticks[data-job="heartbeat"] .tick');
    await strip.first().waitFor();
    assert.equal(await strip.count(), 26);
    const { ticks } = seeded;
    const cell = (tick: number) => page.locator(`tr.ticks[data-job="heartbeat"] .tick[data-tick="${tick}"]`);
    assert.equal(await cell(ticks.heartbeat.late).getAttribute('data-fate'), 'late');
    assert.match((await cell(ticks.heartbeat.late).getAttribute('title'))!, / · late · enqueued \+2\.5 s · started \+\d/);
    assert.match((await cell(ticks.heartbeat.failed).getAttribute('title'))!, / · failed · enqueued \+\d+ ms .*upstream answered 503/);
    assert.match((await cell(ticks.heartbeat.skipped).getAttribute('title'))!, /skipped \(overlap\)$/);
    assert.equal(await cell(ticks.heartbeat.pending).getAttribute('data-fate'), 'pending');
    assert.match((await page.locator('tr.ticks[data-job="heartbeat"] .tick.range').getAttribute('title'))!, /^5 ticks skipped, .* \(missed-window\)$/);
    // Colours come from the stylesheet: a late tick is amber, a failed one red, never the same.
    const colour = (tick: number) => computed(cell(tick), 'backgroundColor');
    assert.notEqual(await colour(ticks.heartbeat.late), await colour(ticks.heartbeat.failed));
    assert.notEqual(await colour(ticks.heartbeat.ran), await colour(ticks.heartbeat.late));
    assert.match(await page.locator('tr.ticks[data-job="heartbeat"] .counts:not(.span)').innerText(), /^20 ran · 2 late · 1 failed · 6 skipped · 1 pending$/);

    const chart = page.locator('tr.ticks[data-job="heartbeat"] svg.lag');
    assert.equal(await chart.locator('circle').count(), 23, 'one point per run');
    assert.match((await chart.getAttribute('aria-label'))!, /^start lag \(run start − tick\) of the last 23 runs: median /);

    // A staged run is added ahead of its tick: its enqueue lag is negative, its start lag is what counts.
    const staged = (tick: number) => page.locator(`tr.ticks[data-job="staged-sync"] .tick[data-tick="${tick}"]`);
    assert.equal(await staged(seeded.staged.late).getAttribute('data-fate'), 'late');
    assert.match((await staged(seeded.staged.late).getAttribute('title'))!, / · late · enqueued −2\.0 s \(staged ahead\) · started \+1\d\.\d s/);
    assert.match((await staged(seeded.staged.onTime).getAttribute('title'))!, / · ran · enqueued −300 ms \(staged ahead\) · started \+\d+ ms/);
    const stagedChart = page.locator('tr.ticks[data-job="staged-sync"] svg.lag');
    assert.equal(await stagedChart.locator('circle').count(), 2);
    assert.match((await stagedChart.getAttribute('aria-label'))!, /^start lag \(run start − tick\) of the last 2 runs: median 1\d\.\d s, max 1\d\.\d s$/);
    assert.match(await page.locator('#lag-meaning').innerText(), /^Start lag \(the chart; metric leasebeat_run_start_lag_seconds\): when a run started .* minus its tick\. Enqueue lag .*negative for a run staged ahead/);
    assert.equal(await page.locator('tr.ticks[data-job="invoice-sync"] .tick.ran').count(), 7);
    const manual = page.locator('tr.ticks[data-job="invoice-sync"] .tick.manual');
    assert.equal(await manual.count(), 1, 'the manual run among the ticks, marked');
    assert.match((await manual.getAttribute('title'))!, / · manual run \(leasebeat trigger\) · ran · started \+.* · invoice-sync@manual-request-1$/);
    assert.notEqual(await computed(manual, 'boxShadow'), await computed(page.locator('tr.ticks[data-job="invoice-sync"] .tick.ran:not(.manual)').first(), 'boxShadow'));
    await screenshot(page, 'status-page-history');
    await page.locator('#ticks').screenshot({ path: (await screenshot(page, 'status-page-history')).replace('history', 'ticks') });
    assert.deepEqual(watched.problems, []);
    assert.deepEqual(watched.external, []);
  });

  it('opens a tick\'s run in Bull Board from its cell', async () => {
    await page.locator(`tr.ticks[data-job="heartbeat"] .tick[data-tick="${seeded.ticks.heartbeat.failed}"]`).click();
    await page.waitForURL('**/admin/queues/queue/ops/**');
    await page.getByText('upstream answered 503').first().waitFor();
    await screenshot(page, 'board-failed-run');
    assert.deepEqual(watched.problems, []);
    assert.deepEqual(watched.external, [], 'Bull Board loads nothing from outside (no Google Fonts)');
  });

  it("lets the board's own page change a queue (same-origin requests pass the cross-site check)", async () => {
    const status = await page.evaluate("fetch('/admin/queues/api/queues/ops/pause', { method: 'PUT' }).then((response) => response.status)");
    assert.equal(status, 200);
    assert.equal(await ops.isPaused(), true);
    await ops.resume();
  });

  it('draws the leadership terms: who led, when, and how each term ended', async () => {
    await page.goto(server.url + '/');
    const rows = page.locator('#leadership tr.term');
    await rows.first().waitFor();
    const terms = await Promise.all([0, 1, 2].map(async (index) => [await rows.nth(index).getAttribute('data-holder'), await rows.nth(index).getAttribute('data-end')]));
    assert.deepEqual(terms, [['pod-c', 'current'], ['pod-b', 'expired'], ['pod-a', 'released']]);
    assert.equal(await rows.count(), 3);
    assert.match(await rows.nth(1).innerText(), /lease expired\s+last renewed .*, lease 15\.0 s\s+then pod-c, 2\.3 s later$/);
    assert.match(await rows.nth(2).innerText(), /released\s+then pod-b, 1\.0 s later$/);
    const bars = page.locator('#leadership .tl-term');
    assert.deepEqual(await bars.allInnerTexts(), ['pod-a', 'pod-b', 'pod-c']);
    const fills = await Promise.all([0, 1, 2].map((index) => computed(bars.nth(index), 'backgroundColor')));
    assert.equal(new Set(fills).size, 3, 'one colour per holder');
    await page.locator('#leadership').screenshot({ path: (await screenshot(page, 'status-page-full')).replace('full', 'leadership') });
  });

  it("shows the term in force on a follower's page too, read from the lease's write history", async () => {
    const leaderView = source.snapshot;
    source.snapshot = { ...leaderView, instance: { ...leaderView.instance, identity: 'pod-a', role: 'follower' }, cluster: { ...leaderView.cluster, term: null } };
    try {
      await page.goto(server.url + '/');
      const current = (await seeded.reader.read()).leadership.terms.at(-1)!;
      assert.equal(current.holder, 'pod-c');
      await page.locator('#term').filter({ hasText: current.generation }).waitFor();
      assert.equal(await page.locator('#term').innerText(), `${current.generation} · 2 transitions`);
    } finally {
      source.snapshot = leaderView;
      await page.goto(server.url + '/');
    }
  });

  it('shows one leader in the members table, not the dead one whose record still says leader', async () => {
    const role = (identity: string) => page.locator(`tr.member[data-member="${identity}"] td`).nth(2).innerText();
    assert.equal(await role('pod-c'), 'leader');
    assert.equal(await role('pod-b'), 'follower');
    assert.equal(await page.locator('tr.member .badge.ok:text-is("leader")').count(), 1);
    assert.equal(await page.locator('tr.member[data-member="pod-b"] td').nth(3).innerText(), '17 min ago');
  });

  it('renders in dark mode too', async () => {
    const dark = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1440, height: 900 }, colorScheme: 'dark' });
    try {
      const darkPage = await dark.newPage();
      const seen = watchPage(darkPage, server.url);
      await darkPage.goto(server.url + '/');
      await darkPage.locator('tr.ticks .tick').first().waitFor();
      const background = await computed(darkPage.locator('body'), 'backgroundColor');
      assert.equal(background, 'rgb(17, 20, 25)');
      await screenshot(darkPage, 'status-page-dark');
      assert.deepEqual(seen.problems, []);
    } finally {
      await dark.close();
    }
  });

  it('refuses a cross-site form post from another origin, even with the board credentials in the browser', async () => {
    const before = await ops.count();
    const attacker = await startAttacker(`${server.url}/admin/queues/api/queues/ops/add`);
    try {
      const attempt = page.waitForResponse((response) => response.url().endsWith('/api/queues/ops/add'));
      await page.goto(attacker.url);
      assert.equal((await attempt).status(), 403);
      assert.equal(await ops.count(), before, 'no job was added');
    } finally {
      await new Promise<void>((resolve) => attacker.server.close(() => resolve()));
    }
  });
});
