import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Watch } from '@kubernetes/client-node';
import { KubernetesLeaseLock } from '../../src/election/kubernetes-lock.js';
import type { LockObservation } from '../../src/election/record.js';
import { leaderAndFollower, slowPollTiming, takeoverAfterRelease } from '../support/contenders.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { until } from '../support/until.js';

const NS = 'default';
const PATH = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;

describe('the fake API server watches Leases like the apiserver', () => {
  let server: FakeLeaseServer;
  before(async () => {
    server = await FakeLeaseServer.start();
  });
  after(async () => {
    await server.close();
  });

  /** Opens a raw client-node watch and collects its events until `done`. */
  async function watch(query: Record<string, string | boolean>): Promise<{ events: Array<[string, { metadata?: { resourceVersion?: string; name?: string }; code?: number; spec?: { holderIdentity?: string } }]>; ended: Promise<unknown>; stop(): void }> {
    const events: Array<[string, never]> = [];
    let end!: (error: unknown) => void;
    const ended = new Promise((resolve) => (end = resolve));
    const controller = await new Watch(server.kubeConfig()).watch(PATH, query, (type, object) => void events.push([type, object as never]), (error) => end(error));
    return { events, ended, stop: () => controller.abort() };
  }

  it('without a resourceVersion: the current Lease as ADDED, then changes as they happen', async () => {
    server.putLease(NS, 'w1', { holderIdentity: 'a', leaseDurationSeconds: 5 });
    const w = await watch({ fieldSelector: 'metadata.name=w1' });
    await until('ADDED', () => w.events.length === 1);
    server.putLease(NS, 'w1', { holderIdentity: 'b', leaseDurationSeconds: 5 });
    server.putLease(NS, 'other', { holderIdentity: 'x', leaseDurationSeconds: 5 });
    server.deleteLease(NS, 'w1');
    await until('MODIFIED and DELETED', () => w.events.length === 3);
    assert.deepEqual(w.events.map(([type, o]) => [type, o.spec?.holderIdentity]), [['ADDED', 'a'], ['MODIFIED', 'b'], ['DELETED', 'b']]);
    w.stop();
  });

  it('from a resourceVersion: replays every later change in order; bookmarks carry the newest version', async () => {
    const first = server.putLease(NS, 'w2', { holderIdentity: 'a', leaseDurationSeconds: 5 });
    server.putLease(NS, 'w2', { holderIdentity: 'b', leaseDurationSeconds: 5 });
    const last = server.putLease(NS, 'w2', { holderIdentity: 'c', leaseDurationSeconds: 5 });
    server.setBookmarkInterval(50);
    const w = await watch({ fieldSelector: 'metadata.name=w2', resourceVersion: first.metadata.resourceVersion, allowWatchBookmarks: true });
    await until('a bookmark', () => w.events.some(([type]) => type === 'BOOKMARK'));
    assert.deepEqual(w.events.filter(([type]) => type !== 'BOOKMARK').map(([type, o]) => [type, o.spec?.holderIdentity]), [['MODIFIED', 'b'], ['MODIFIED', 'c']]);
    const bookmark = w.events.find(([type]) => type === 'BOOKMARK')![1];
    assert.ok(Number(bookmark.metadata?.resourceVersion) >= Number(last.metadata.resourceVersion));
    w.stop();
    server.setBookmarkInterval(1_000);
  });

  it('an old, compacted resourceVersion gets one ERROR event with a 410 Status, and the stream ends', async () => {
    const lease = server.putLease(NS, 'w3', { holderIdentity: 'a', leaseDurationSeconds: 5 });
    server.compactWatchCache();
    const w = await watch({ fieldSelector: 'metadata.name=w3', resourceVersion: lease.metadata.resourceVersion });
    await w.ended;
    assert.equal(w.events.length, 1);
    assert.equal(w.events[0]![0], 'ERROR');
    assert.equal(w.events[0]![1].code, 410);
  });

  it('dropWatches ends every open stream', async () => {
    const w = await watch({ fieldSelector: 'metadata.name=w4' });
    await until('the watch to open', () => server.openWatches() > 0);
    server.dropWatches();
    await w.ended;
    assert.equal(server.openWatches(), 0);
  });
});

describe('KubernetesLeaseLock change feed', () => {
  let server: FakeLeaseServer;
  let name: string;
  let count = 0;
  before(async () => {
    server = await FakeLeaseServer.start();
  });
  after(async () => {
    await server.close();
  });
  beforeEach(() => {
    name = `feed-${++count}`;
  });

  function follow(lock: KubernetesLeaseLock): { changes: LockObservation[]; live: boolean[]; stop(): void } {
    const feed = { changes: [] as LockObservation[], live: [] as boolean[], stop: () => controller.abort() };
    const controller = new AbortController();
    lock.watch(controller.signal, { change: (o) => feed.changes.push(o), live: (l) => feed.live.push(l) });
    return feed;
  }

  it('lists, then reports every change; after a dropped stream it resumes from the newest version without losing one', async () => {
    server.putLease(NS, name, { holderIdentity: 'a', leaseDurationSeconds: 5 });
    const feed = follow(new KubernetesLeaseLock({ namespace: NS, name, identity: 'x', kubeConfig: server.kubeConfig(), watchRetryMs: 50 }));
    await until('live', () => feed.live.at(-1) === true);
    server.putLease(NS, name, { holderIdentity: 'b', leaseDurationSeconds: 5 });
    await until('b', () => feed.changes.at(-1)?.record.holderIdentity === 'b');
    server.dropWatches();
    await until('down', () => feed.live.includes(false));
    // Changed while no stream was open: the resumed watch replays it.
    server.putLease(NS, name, { holderIdentity: 'c', leaseDurationSeconds: 5 });
    await until('c after resuming', () => feed.changes.at(-1)?.record.holderIdentity === 'c' && feed.live.at(-1) === true);
    assert.deepEqual(feed.changes.map((c) => c.record.holderIdentity), ['a', 'b', 'c']);
    assert.equal(server.verbs().filter((v) => v === 'list').length, 1, 'resumed without listing again');
    feed.stop();
  });

  it('lists again when the apiserver answers 410 to a resume', async () => {
    server.putLease(NS, name, { holderIdentity: 'a', leaseDurationSeconds: 5 });
    server.resetRequests();
    const feed = follow(new KubernetesLeaseLock({ namespace: NS, name, identity: 'x', kubeConfig: server.kubeConfig(), watchRetryMs: 50 }));
    await until('live', () => feed.live.at(-1) === true);
    server.compactWatchCache();
    server.dropWatches();
    server.putLease(NS, name, { holderIdentity: 'd', leaseDurationSeconds: 5 });
    await until('d', () => feed.changes.at(-1)?.record.holderIdentity === 'd' && feed.live.at(-1) === true);
    assert.equal(server.verbs().filter((v) => v === 'list').length, 2, 'a second list after the 410');
    feed.stop();
  });

  it('electors on the watch do not poll', async () => {
    const timing = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 };
    const lock = (identity: string): KubernetesLeaseLock => new KubernetesLeaseLock({ namespace: NS, name, identity, kubeConfig: server.kubeConfig() });
    const { leader, follower } = await leaderAndFollower(lock('a'), lock('b'), timing, 0);
    await until('b to follow on a live watch', () => server.openWatches() >= 2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const gets = server.verbs().filter((v) => v === 'get').length;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Polling would have read the Lease four times in that second.
    assert.ok(server.verbs().filter((v) => v === 'get').length - gets <= 1, 'followers on a live watch do not poll');
    await leader.stop();
    await follower.stop();
  });

  it('a release wakes the follower through the watch, long before its next poll', async () => {
    const lock = (identity: string): KubernetesLeaseLock => new KubernetesLeaseLock({ namespace: NS, name, identity, kubeConfig: server.kubeConfig() });
    const tookMs = await takeoverAfterRelease(lock('a'), lock('b'), () => server.openWatches() >= 2);
    assert.ok(tookMs < slowPollTiming.retryPeriodMs / 2, `took over ${tookMs} ms after the release began`);
  });
});
