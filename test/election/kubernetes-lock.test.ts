import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino, type Logger } from 'pino';
import { KubernetesApiError, KubernetesLeaseLock } from '../../src/election/kubernetes-lock.js';
import { serializeRecord, type LockVersion, type LeaderElectionRecord } from '../../src/election/record.js';
import { LockConflictError, LockNotFoundError } from '../../src/election/resource-lock.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { runLockContract } from './lock-contract.js';

const NS = 'leasebeat';
const signal = (): AbortSignal => AbortSignal.timeout(5000);

/** A record whose times have odd milliseconds, to catch any rounding on the wire. */
function record(holder: string, transitions = 0, renewTime = Date.UTC(2026, 0, 1, 0, 0, 10, 987)): LeaderElectionRecord {
  return { holderIdentity: holder, leaseDurationSeconds: 15, acquireTime: Date.UTC(2026, 0, 1, 0, 0, 0, 1), renewTime, leaderTransitions: transitions };
}

/** A pino logger whose lines land in `lines`. */
function capturingLogger(lines: Array<Record<string, unknown>>): Logger {
  return pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
}

void runLockContract('KubernetesLeaseLock', async () => {
  const server = await FakeLeaseServer.start();
  const kubeConfig = server.kubeConfig();
  return {
    makeLock: (identity) => new KubernetesLeaseLock({ namespace: 'contract', name: 'leader', identity, kubeConfig }),
    deleteRecord: () => Promise.resolve(void server.deleteLease('contract', 'leader')),
    close: () => server.close(),
  };
});

void describe('KubernetesLeaseLock against the fake API server', () => {
  let server: FakeLeaseServer;
  let counter = 0;
  let name: string;

  const makeLock = (identity: string, extra: Partial<ConstructorParameters<typeof KubernetesLeaseLock>[0]> = {}): KubernetesLeaseLock =>
    new KubernetesLeaseLock({ namespace: NS, name, identity, kubeConfig: server.kubeConfig(), ...extra });

  before(async () => {
    server = await FakeLeaseServer.start();
  });
  after(async () => {
    await server.close();
  });
  beforeEach(() => {
    name = `lease-${++counter}`;
    server.clearFaults();
    server.resetRequests();
  });

  void it('writes MicroTimes with six digits and round-trips create/get/update to the millisecond', async () => {
    const a = makeLock('a');
    const created = await a.create(record('a'), signal());
    const stored = server.lease(NS, name);
    assert.equal(stored?.spec.acquireTime, '2026-01-01T00:00:00.001000Z');
    assert.equal(stored?.spec.renewTime, '2026-01-01T00:00:10.987000Z');
    assert.equal(stored?.spec.holderIdentity, 'a');
    assert.equal(stored?.spec.leaseTransitions, 0);

    const observed = await makeLock('b').get(signal());
    assert.deepEqual(observed.record, record('a'));
    assert.equal(observed.raw, serializeRecord(record('a')));

    const renewed = record('a', 0, Date.UTC(2026, 0, 1, 0, 0, 12, 345));
    await a.update(renewed, created, signal());
    assert.deepEqual((await makeLock('c').get(signal())).record, renewed);
    // client-go's fast path: the holder renews on the object it wrote, without a GET.
    assert.deepEqual(server.verbs(), ['create', 'get', 'update', 'get']);
  });

  void it('reads times written by others with microseconds, and absent fields as zero values', async () => {
    server.putLease(NS, name, { holderIdentity: 'x', leaseDurationSeconds: 7, renewTime: '2026-01-01T00:00:00.123456Z', leaseTransitions: 4 });
    const observed = await makeLock('a').get(signal());
    assert.deepEqual(observed.record, {
      holderIdentity: 'x', leaseDurationSeconds: 7, acquireTime: 0, renewTime: Date.UTC(2026, 0, 1, 0, 0, 0, 123), leaderTransitions: 4,
    });

    server.putLease(NS, name, {});
    const empty = await makeLock('a').get(signal());
    assert.deepEqual(empty.record, { holderIdentity: '', leaseDurationSeconds: 0, acquireTime: 0, renewTime: 0, leaderTransitions: 0 });
  });

  void it('compare-and-swap: both observe, both update, exactly one wins and the loser gets LockConflictError', async () => {
    await makeLock('seed').create(record(''), signal());
    const a = makeLock('a');
    const b = makeLock('b');
    const [seenByA, seenByB] = [await a.get(signal()), await b.get(signal())];
    const results = await Promise.allSettled([a.update(record('a', 1), seenByA.version, signal()), b.update(record('b', 1), seenByB.version, signal())]);
    const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i === 0 ? 'a' : 'b'] : []));
    const losers = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    assert.equal(winners.length, 1);
    assert.equal(losers.length, 1);
    assert.ok(losers[0] instanceof LockConflictError);
    assert.match(losers[0].message, /HTTP 409 Conflict: .*the object has been modified/);
    assert.equal(server.lease(NS, name)?.spec.holderIdentity, winners[0]);

    // The winner keeps renewing on the version it wrote; the loser succeeds once it re-reads.
    const [winner, loser] = winners[0] === 'a' ? [a, b] : [b, a];
    const won = results.find((r): r is PromiseFulfilledResult<LockVersion> => r.status === 'fulfilled')!.value;
    await winner.update(record(winner.identity(), 1), won, signal());
    await loser.update(record(loser.identity(), 2), (await loser.get(signal())).version, signal());
  });

  void it('maps 404 to LockNotFoundError and AlreadyExists to LockConflictError', async () => {
    const a = makeLock('a');
    await assert.rejects(a.get(signal()), (e: unknown) =>
      e instanceof LockNotFoundError && e.message.includes(`leases.coordination.k8s.io "${name}" not found`));
    await a.create(record('a'), signal());
    await assert.rejects(makeLock('b').create(record('b'), signal()), (e: unknown) =>
      e instanceof LockConflictError && /AlreadyExists/.test(e.message));
  });

  void it('refuses an update based on a version it did not hand out, without a request', async () => {
    const created = await makeLock('a').create(record('a'), signal());
    await assert.rejects(makeLock('b').update(record('b'), { generation: created.generation }, signal()), /did not return/);
    assert.deepEqual(server.verbs(), ['create']);
  });

  void it('passes other API errors through with status code, reason and Status message', async () => {
    const a = makeLock('a');
    server.failNext(1, { status: 503 }, 'get');
    await assert.rejects(a.get(signal()), (e: unknown) =>
      e instanceof KubernetesApiError && e.statusCode === 503 && e.reason === 'ServiceUnavailable' &&
      e.message.includes('HTTP 503 ServiceUnavailable: The server is currently unable to handle the request'));
    await assert.rejects(a.create({ ...record('a'), leaseDurationSeconds: 0 }, signal()), (e: unknown) =>
      e instanceof KubernetesApiError && e.statusCode === 422 && /must be greater than 0/.test(e.message));
  });

  void it('passes transport errors through, naming the lock', async () => {
    const gone = await FakeLeaseServer.start();
    const kubeConfig = gone.kubeConfig();
    await gone.close();
    const lock = new KubernetesLeaseLock({ namespace: NS, name, identity: 'a', kubeConfig });
    await assert.rejects(lock.get(signal()), (e: unknown) =>
      e instanceof Error && e.message.startsWith(`get lease ${NS}/${name}: `) && /ECONNREFUSED/.test(e.message));
  });

  void it('generation is the Lease uid and changes when the Lease is deleted and recreated', async () => {
    const a = makeLock('a');
    const created = await a.create(record('a'), signal());
    const uid = server.lease(NS, name)?.metadata.uid;
    assert.equal(created.generation, uid);
    assert.equal((await makeLock('b').get(signal())).version.generation, uid);

    server.deleteLease(NS, name);
    // Like client-go, the update carries the old uid: the apiserver refuses it instead of recreating.
    await assert.rejects(a.update(record('a'), created, signal()), LockConflictError);
    await assert.rejects(a.get(signal()), LockNotFoundError);
    const recreated = await a.create(record('a'), signal());
    assert.notEqual(recreated.generation, uid);
    assert.equal(recreated.generation, server.lease(NS, name)?.metadata.uid);
  });

  void it('aborts a hung request promptly, closing the HTTP request, and rejects with the signal reason', async () => {
    const a = makeLock('a');
    await a.create(record('a'), signal());
    server.hangNext(1, 'get');
    const controller = new AbortController();
    const pending = a.get(controller.signal);
    await server.whenHung();
    const reason = new Error('renew deadline');
    controller.abort(reason);
    // Rejected by the abort itself, before the event loop turns (no timer, no reply): on any load.
    const turned = new Promise<string>((resolve) => setImmediate(() => resolve('still pending after a turn of the event loop')));
    const outcome = await Promise.race([pending.then(() => 'resolved', (error: unknown) => (error === reason ? 'rejected with the reason' : error)), turned]);
    assert.equal(outcome, 'rejected with the reason');
    await server.whenAbandoned();
    await server.releaseHung();
  });

  void it('sends nothing when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await assert.rejects(makeLock('a').get(controller.signal), /stop/);
    assert.deepEqual(server.requests(), []);
  });

  void it('an abandoned update that lands later cannot become the base of a blind write', async () => {
    const a = makeLock('a');
    const created = await a.create(record('a'), signal());
    server.hangNext(1, 'update');
    const controller = new AbortController();
    const abandoned = a.update(record('a', 0, Date.UTC(2026, 0, 1, 0, 0, 20)), created, controller.signal);
    await server.whenHung();
    controller.abort(new Error('deadline'));
    await assert.rejects(abandoned, /deadline/);
    await server.whenAbandoned();

    // The apiserver still applies the write whose client gave up.
    await server.releaseHung();
    assert.equal(server.lease(NS, name)?.spec.renewTime, '2026-01-01T00:00:20.000000Z');

    // A write based on the version before the abandoned one is refused, never blindly applied.
    await assert.rejects(a.update(record('a', 0, Date.UTC(2026, 0, 1, 0, 0, 30)), created, signal()), LockConflictError);
    const current = await a.get(signal());
    assert.equal(current.record.renewTime, Date.UTC(2026, 0, 1, 0, 0, 20));
    await a.update(record('a', 0, Date.UTC(2026, 0, 1, 0, 0, 30)), current.version, signal());
  });

  void it('recordEvent lands a core/v1 Event on the Lease', async () => {
    const a = makeLock('a', { eventComponent: 'leasebeat-test' });
    const created = await a.create(record('a'), signal());
    a.recordEvent('a became leader');
    await a.flushEvents();
    const events = server.events().filter((e) => (e.body.involvedObject as { name?: string }).name === name);
    assert.equal(events.length, 1);
    const event = events[0]!;
    assert.equal(event.api, 'core/v1');
    assert.equal(event.namespace, NS);
    assert.equal(event.body.reason, 'LeaderElection');
    assert.equal(event.body.message, 'a became leader');
    assert.equal(event.body.type, 'Normal');
    assert.deepEqual(event.body.involvedObject, {
      apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name, namespace: NS,
      uid: created.generation, resourceVersion: server.lease(NS, name)?.metadata.resourceVersion,
    });
    assert.equal((event.body.source as { component?: string }).component, 'leasebeat-test');
  });

  void it('recordEvent never throws: a failing or hung events endpoint is logged at warn', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const a = makeLock('a', { logger: capturingLogger(lines), eventTimeoutMs: 100 });
      await a.create(record('a'), signal());
      const before = server.events().length;

      server.failNext(1, { status: 500 }, 'event');
      assert.doesNotThrow(() => a.recordEvent('a became leader'));
      server.hangNext(1, 'event');
      a.recordEvent('a stopped leading');
      const started = performance.now();
      await a.flushEvents();
      assert.ok(performance.now() - started < 2000, 'the hung event was given up after its timeout');
      await new Promise((resolve) => setImmediate(resolve));

      assert.equal(server.events().length, before);
      assert.equal(lines.length, 2);
      for (const line of lines) {
        assert.equal(line.level, 40);
        assert.equal(line.msg, 'could not record leader election event');
        assert.equal(line.lock, `${NS}/${name}`);
      }
      assert.match(JSON.stringify(lines[0]), /HTTP 500 InternalError/);
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await server.releaseHung();
    }
  });

  void it('without a kubeConfig it loads the default one ($KUBECONFIG)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'leasebeat-kubeconfig-'));
    const file = await server.writeKubeconfig(dir);
    const previous = process.env.KUBECONFIG;
    process.env.KUBECONFIG = file;
    try {
      const lock = new KubernetesLeaseLock({ namespace: NS, name, identity: 'a' });
      await lock.create(record('a'), signal());
      assert.equal(server.lease(NS, name)?.spec.holderIdentity, 'a');
    } finally {
      if (previous === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = previous;
      await rm(dir, { recursive: true, force: true });
    }
  });

  void it('validates its options and describes itself', () => {
    assert.throws(() => makeLock(''), /identity must not be empty/);
    const lock = makeLock('a');
    assert.equal(lock.identity(), 'a');
    assert.equal(lock.describe(), `${NS}/${name}`);
  });
});
