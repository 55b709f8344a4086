import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { MemberStatus } from '../../src/members/status.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import type { StatusSnapshot } from '../../src/serving/sources.js';
import { fixedSource, LEADER, sampleSnapshot } from '../serving/fixture.js';
import { launchChromium, screenshot, watchPage } from '../support/browser.js';

function member(identity: string, fields: Partial<MemberStatus>): MemberStatus {
  return {
    identity,
    role: 'follower',
    lastSeen: '2026-01-01T00:10:00.000Z',
    condition: 'Ready',
    reason: null,
    heartbeatAgeMs: 1_200,
    version: '0.1.0',
    startedAt: '2026-01-01T00:00:00.000Z',
    workers: 'running',
    activeJobs: 0,
    activeJobIds: [],
    activeJobsWhenUnknown: [],
    cordoned: false,
    cordonRequested: false,
    draining: false,
    ...fields,
  };
}

function snapshotWithMembers(): StatusSnapshot {
  const snapshot = sampleSnapshot();
  snapshot.cluster.disruption = 'PartialDisruption';
  snapshot.cluster.members = [
    member(LEADER, { role: 'leader', activeJobs: 1, activeJobIds: ['reports/nightly-report@1'] }),
    member('pod-dead', { condition: 'Unknown', heartbeatAgeMs: 42_000, activeJobs: 2, activeJobsWhenUnknown: ['reports/a@1', 'reports/b@2'] }),
    member('pod-cordoned', { workers: 'draining', cordoned: true, draining: true, activeJobs: 1 }),
    member('<b>pod-hostile</b>', { condition: 'NotReady', reason: 'no jobs loaded (0 loaded, 3 failed)', workers: 'stopped' }),
    // Killed while it led: its last record still says "leader" although LEADER holds the lease now.
    member('pod-old-leader', { role: 'leader', condition: 'Unknown', heartbeatAgeMs: 4 * 60_000 }),
  ];
  return snapshot;
}

describe('the members table on the status page, in a real browser', () => {
  let server: HttpServerHandle;
  let browser: Browser;
  let page: Page;
  let problems: string[];
  const source = fixedSource([]);

  before(async () => {
    source.snapshot = snapshotWithMembers();
    server = await startHttpServer({ host: '127.0.0.1', port: 0, source, metrics: createMetrics() });
    browser = await launchChromium();
    page = await browser.newPage();
    ({ problems } = watchPage(page, server.url));
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('shows condition, role, heartbeat age, active jobs (and those of an Unknown member), cordon and drain, and the disruption', async () => {
    await page.goto(server.url + '/');
    await page.locator('#disruption').filter({ hasText: 'PartialDisruption' }).waitFor();
    const cells = async (identity: string): Promise<string[]> =>
      page.locator(`tr.member[data-member="${identity}"] td`).allInnerTexts();

    const leader = await cells(LEADER);
    assert.match(leader[0]!, new RegExp(`^${LEADER}\\s+leader`));
    assert.deepEqual(leader.slice(1, 4), ['Ready', 'leader', '1.2 s ago']);
    assert.match(leader[4]!, /^1\s+reports\/nightly-report@1$/);

    const dead = await cells('pod-dead');
    assert.deepEqual(dead.slice(1, 4), ['Unknown', 'follower', '42.0 s ago']);
    assert.match(dead[4]!, /active when Unknown: reports\/a@1, reports\/b@2/);
    assert.equal(await page.locator('tr.member[data-member="pod-dead"] .badge.bad').innerText(), 'Unknown');

    assert.match((await cells('pod-cordoned'))[5]!, /^cordoned\s+workers draining$/, 'cordon and workers each said once, named');
    const hostile = await cells('<b>pod-hostile</b>');
    assert.match(hostile[0]!, /^<b>pod-hostile<\/b>/, 'identities are text, never markup');
    assert.match(hostile[5]!, /^workers stopped\s+no jobs loaded \(0 loaded, 3 failed\)$/);

    // One leader only: the lease holder. The dead former leader is a follower, dead for minutes.
    assert.deepEqual((await cells('pod-old-leader')).slice(0, 4), ['pod-old-leader\nv0.1.0', 'Unknown', 'follower', '4 min ago']);
    assert.equal(await page.locator('tr.member td:nth-child(3):text-is("leader")').count(), 1);
    await screenshot(page, 'status-page-members');
    assert.doesNotMatch(await page.locator('main').innerText(), /\bnull\b|undefined/, 'no section this source lacks leaves a trace');
    const widths = await page.evaluate('[document.documentElement.scrollWidth, window.innerWidth]');
    assert.ok((widths as number[])[0]! <= (widths as number[])[1]!, `the page scrolls sideways: ${String(widths)}`);
    assert.deepEqual(problems, []);
  });

  it('without a judging leader, says so instead of showing a state', async () => {
    const snapshot = snapshotWithMembers();
    snapshot.cluster.disruption = null;
    snapshot.cluster.members = [member('pod-x', { condition: null, heartbeatAgeMs: null })];
    source.snapshot = snapshot;
    await page.goto(server.url + '/');
    await page.locator('#disruption').filter({ hasText: 'not judged (no leader)' }).waitFor();
    const cells = await page.locator('tr.member[data-member="pod-x"] td').allInnerTexts();
    assert.equal(cells[1], '—');
    assert.deepEqual(problems, []);
  });
});
