import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  V1MicroTime,
  type V1Lease,
  type V1LeaseSpec,
} from '@kubernetes/client-node';
import { abortableRequest } from '../../src/election/kubernetes-lock.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';

const NS = 'default';

/** Polls a condition every 5 ms, failing after 5 s. */
async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail('condition not met within 5 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RFC3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

interface CaughtStatus {
  code: number;
  status: Record<string, unknown>;
  headers: Record<string, string>;
}

/** Awaits a client call that must fail, and returns its HTTP code and decoded Status body. */
async function statusOf(call: Promise<unknown>): Promise<CaughtStatus> {
  try {
    await call;
  } catch (error) {
    assert.ok(error instanceof ApiException, `expected an ApiException, got ${String(error)}`);
    assert.equal(typeof error.body, 'string', 'client-node hands the Status body over as a string');
    return { code: error.code, status: JSON.parse(error.body as string) as Record<string, unknown>, headers: error.headers };
  }
  assert.fail('the call should have failed');
}

function leaseBody(name: string, spec: V1LeaseSpec = {}): V1Lease {
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name },
    spec: {
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: new V1MicroTime(Date.UTC(2026, 0, 1, 0, 0, 0, 123)),
      renewTime: new V1MicroTime(Date.UTC(2026, 0, 1, 0, 0, 5, 456)),
      leaseTransitions: 0,
      ...spec,
    },
  };
}

function expectedStatus(code: number, reason: string, message: string, name: string): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    details: { name, group: 'coordination.k8s.io', kind: 'leases' },
    code,
  };
}

async function rawRequest(server: FakeLeaseServer, method: string, path: string, body: unknown): Promise<{ code: number; json: Record<string, unknown> }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { code: response.status, json: (await response.json()) as Record<string, unknown> };
}

void describe('FakeLeaseServer through the real client-node client', () => {
  let server: FakeLeaseServer;
  let api: CoordinationV1Api;
  let counter = 0;
  let name: string;

  before(async () => {
    server = await FakeLeaseServer.start();
    api = server.kubeConfig().makeApiClient(CoordinationV1Api);
  });
  after(async () => {
    await server.close();
  });
  beforeEach(() => {
    name = `lease-${++counter}`;
    server.clearFaults();
    server.resetRequests();
  });

  void it('POST answers 201 with server-set metadata, GET answers 200 with the same Lease', async () => {
    const created = await api.createNamespacedLeaseWithHttpInfo({ namespace: NS, body: leaseBody(name) });
    assert.equal(created.httpStatusCode, 201);
    assert.equal(created.data.apiVersion, 'coordination.k8s.io/v1');
    assert.equal(created.data.kind, 'Lease');
    assert.match(created.data.metadata?.uid ?? '', UUID);
    assert.match(created.data.metadata?.resourceVersion ?? '', /^\d+$/);

    const read = await api.readNamespacedLeaseWithHttpInfo({ name, namespace: NS });
    assert.equal(read.httpStatusCode, 200);
    assert.equal(read.data.metadata?.uid, created.data.metadata?.uid);
    assert.equal(read.data.metadata?.resourceVersion, created.data.metadata?.resourceVersion);
    // client-node leaves MicroTime as the wire string; the server keeps six fractional digits.
    assert.equal(read.data.spec?.renewTime, '2026-01-01T00:00:05.456000Z');

    const stored = server.lease(NS, name);
    assert.match(stored?.metadata.creationTimestamp ?? '', RFC3339_SECONDS);
    assert.equal(stored?.spec.acquireTime, '2026-01-01T00:00:00.123000Z');
    assert.deepEqual(server.requests().map((r) => [r.verb, r.name, r.status]), [['create', name, 201], ['get', name, 200]]);
  });

  void it('GET of a missing Lease answers 404 NotFound with a real Status body', async () => {
    const { code, status } = await statusOf(api.readNamespacedLease({ name, namespace: NS }));
    assert.equal(code, 404);
    assert.deepEqual(status, expectedStatus(404, 'NotFound', `leases.coordination.k8s.io "${name}" not found`, name));
  });

  void it('POST of an existing Lease answers 409 AlreadyExists', async () => {
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const { code, status } = await statusOf(api.createNamespacedLease({ namespace: NS, body: leaseBody(name) }));
    assert.equal(code, 409);
    assert.deepEqual(status, expectedStatus(409, 'AlreadyExists', `leases.coordination.k8s.io "${name}" already exists`, name));
  });

  void it('PUT with the current resourceVersion answers 200 and bumps it; a stale one answers 409 Conflict', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const updated = await api.replaceNamespacedLeaseWithHttpInfo({
      name, namespace: NS, body: { ...created, spec: { ...created.spec, holderIdentity: 'b' } },
    });
    assert.equal(updated.httpStatusCode, 200);
    assert.equal(updated.data.metadata?.uid, created.metadata?.uid);
    assert.ok(Number(updated.data.metadata?.resourceVersion) > Number(created.metadata?.resourceVersion));
    assert.equal(updated.data.spec?.holderIdentity, 'b');

    const { code, status } = await statusOf(api.replaceNamespacedLease({
      name, namespace: NS, body: { ...created, spec: { ...created.spec, holderIdentity: 'c' } },
    }));
    assert.equal(code, 409);
    assert.deepEqual(status, expectedStatus(409, 'Conflict',
      `Operation cannot be fulfilled on leases.coordination.k8s.io "${name}": the object has been modified; ` +
      'please apply your changes to the latest version and try again', name));
    assert.equal(server.lease(NS, name)?.spec.holderIdentity, 'b');
  });

  void it('PUT that changes nothing keeps the resourceVersion', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const same = await api.replaceNamespacedLease({ name, namespace: NS, body: created });
    assert.equal(same.metadata?.resourceVersion, created.metadata?.resourceVersion);
  });

  void it('PUT without a resourceVersion on an existing Lease answers 422 Invalid', async () => {
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const { code, status } = await statusOf(api.replaceNamespacedLease({ name, namespace: NS, body: leaseBody(name) }));
    assert.equal(code, 422);
    assert.equal(status.reason, 'Invalid');
    assert.match(String(status.message), /metadata\.resourceVersion: Invalid value: 0x0: must be specified for an update/);
    const details = status.details as { causes: Array<{ field: string }> };
    assert.equal(details.causes[0]?.field, 'metadata.resourceVersion');
  });

  void it('PUT to a missing Lease creates it (201); with a uid in the body it fails the uid precondition (409)', async () => {
    const created = await api.replaceNamespacedLeaseWithHttpInfo({ name, namespace: NS, body: leaseBody(name) });
    assert.equal(created.httpStatusCode, 201);
    assert.match(created.data.metadata?.uid ?? '', UUID);

    assert.ok(server.deleteLease(NS, name));
    const { code, status } = await statusOf(api.replaceNamespacedLease({ name, namespace: NS, body: created.data }));
    assert.equal(code, 409);
    assert.equal(status.reason, 'Conflict');
    assert.match(String(status.message), /Precondition failed: UID in precondition/);
    assert.equal(server.lease(NS, name), undefined);
  });

  void it('rejects invalid spec values with 422: leaseDurationSeconds <= 0 and leaseTransitions < 0', async () => {
    const zero = await statusOf(api.createNamespacedLease({ namespace: NS, body: leaseBody(name, { leaseDurationSeconds: 0 }) }));
    assert.equal(zero.code, 422);
    assert.equal(zero.status.reason, 'Invalid');
    assert.match(String(zero.status.message), /spec\.leaseDurationSeconds: Invalid value: 0: must be greater than 0/);

    const negative = await statusOf(api.createNamespacedLease({ namespace: NS, body: leaseBody(name, { leaseTransitions: -1 }) }));
    assert.equal(negative.code, 422);
    assert.match(String(negative.status.message), /spec\.leaseTransitions: Invalid value: -1/);
    assert.equal(server.lease(NS, name), undefined);
  });

  void it('rejects a MicroTime without exactly six fractional digits with 400 BadRequest', async () => {
    const path = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
    const threeDigits = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name },
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, renewTime: '2026-01-01T00:00:00.123Z' } };
    const posted = await rawRequest(server, 'POST', path, threeDigits);
    assert.equal(posted.code, 400);
    assert.equal(posted.json.reason, 'BadRequest');
    assert.equal(posted.json.code, 400);
    assert.match(String(posted.json.message), /renewTime/);

    const put = await rawRequest(server, 'PUT', `${path}/${name}`, threeDigits);
    assert.equal(put.code, 400);
    assert.equal(server.lease(NS, name), undefined);

    const sixDigits = await rawRequest(server, 'POST', path,
      { ...threeDigits, spec: { ...threeDigits.spec, renewTime: '2026-01-01T00:00:00.123456Z' } });
    assert.equal(sixDigits.code, 201);
    assert.equal(server.lease(NS, name)?.spec.renewTime, '2026-01-01T00:00:00.123456Z');
  });

  void it('third-party writes bump the resourceVersion, and a recreated Lease gets a new uid', async () => {
    const first = server.putLease(NS, name, { holderIdentity: 'x', leaseDurationSeconds: 10 });
    const second = server.putLease(NS, name, { holderIdentity: 'y', leaseDurationSeconds: 10 });
    assert.equal(second.metadata.uid, first.metadata.uid);
    assert.ok(Number(second.metadata.resourceVersion) > Number(first.metadata.resourceVersion));
    assert.equal((await api.readNamespacedLease({ name, namespace: NS })).spec?.holderIdentity, 'y');

    assert.ok(server.deleteLease(NS, name));
    assert.equal(server.deleteLease(NS, name), false);
    const recreated = server.putLease(NS, name, { holderIdentity: 'z' });
    assert.notEqual(recreated.metadata.uid, first.metadata.uid);
  });

  void it('DELETE answers a Success Status and the Lease is gone', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const status = await api.deleteNamespacedLease({ name, namespace: NS });
    assert.equal(status.status, 'Success');
    assert.equal(status.details?.uid, created.metadata?.uid);
    assert.equal((await statusOf(api.readNamespacedLease({ name, namespace: NS }))).code, 404);
    assert.deepEqual(server.verbs(), ['create', 'delete', 'get']);
  });

  void it('adds latency to the targeted verb only', async () => {
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    server.setLatency(150, 'get');
    const started = performance.now();
    await api.readNamespacedLease({ name, namespace: NS });
    assert.ok(performance.now() - started >= 145, 'the GET was delayed');
    server.setLatency(0, 'get');
    server.setLatency(10_000, 'delete');
    const quick = performance.now();
    await api.readNamespacedLease({ name, namespace: NS });
    assert.ok(performance.now() - quick < 5000, 'latency on another verb does not apply');
  });

  void it('answers the next N requests with 503 or 500, then recovers', async () => {
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    server.failNext(2, { status: 503 }, 'get');
    server.failNext(1, { status: 500 });
    for (const _attempt of [1, 2]) {
      const { code, status } = await statusOf(api.readNamespacedLease({ name, namespace: NS }));
      assert.equal(code, 503);
      assert.equal(status.reason, 'ServiceUnavailable');
    }
    const internal = await statusOf(api.readNamespacedLease({ name, namespace: NS }));
    assert.equal(internal.code, 500);
    assert.equal(internal.status.reason, 'InternalError');
    await api.readNamespacedLease({ name, namespace: NS });
    assert.deepEqual(server.requests().map((r) => r.status), [201, 503, 503, 500, 200]);
  });

  void it('answers 429 TooManyRequests with Retry-After', async () => {
    server.failNext(1, { status: 429, retryAfterSeconds: 3 }, 'create');
    const { code, status, headers } = await statusOf(api.createNamespacedLease({ namespace: NS, body: leaseBody(name) }));
    assert.equal(code, 429);
    assert.equal(status.reason, 'TooManyRequests');
    assert.equal(headers['retry-after'], '3');
    assert.equal((status.details as { retryAfterSeconds: number }).retryAfterSeconds, 3);
    assert.equal(server.lease(NS, name), undefined);
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
  });

  void it('holds a hung request until released, and a client call aborted by its signal rejects at once', async () => {
    await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    server.hangNext(1, 'get');
    const controller = new AbortController();
    const call = api.readNamespacedLease({ name, namespace: NS }, await abortableRequest(controller.signal));
    await server.whenHung();
    assert.deepEqual(server.hung(), [{ verb: 'get', name, clientClosed: false }]);

    const started = performance.now();
    controller.abort();
    await assert.rejects(call, { name: 'AbortError' });
    assert.ok(performance.now() - started < 50, `rejected after ${performance.now() - started} ms`);
    // The socket itself was closed, not just the promise abandoned.
    await server.whenAbandoned();
    await server.releaseHung();
    assert.deepEqual(server.hung(), []);

    server.hangNext(1, 'get');
    const released = api.readNamespacedLease({ name, namespace: NS });
    await server.whenHung();
    await server.releaseHung();
    assert.equal((await released).metadata?.name, name);
  });

  void it('close() ends hung requests and returns promptly', async () => {
    const own = await FakeLeaseServer.start();
    const ownApi = own.kubeConfig().makeApiClient(CoordinationV1Api);
    own.hangNext(1);
    const call = ownApi.readNamespacedLease({ name, namespace: NS });
    await own.whenHung();
    const started = performance.now();
    await own.close();
    await assert.rejects(call);
    assert.ok(performance.now() - started < 1000);
  });

  void it('keeps a history of every applied write: creates, updates, deletes; no-op and refused writes are none', async () => {
    const since = server.writeHistory().at(-1)?.seq ?? 0;
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    await api.replaceNamespacedLease({ name, namespace: NS, body: created });
    const renewed = await api.replaceNamespacedLease({
      name, namespace: NS, body: { ...created, spec: { ...created.spec, holderIdentity: 'b', leaseTransitions: 1 } },
    });
    await statusOf(api.replaceNamespacedLease({ name, namespace: NS, body: created }));
    server.putLease(NS, name, { holderIdentity: 'c', leaseTransitions: 2 });
    await api.deleteNamespacedLease({ name, namespace: NS });

    const writes = server.writeHistory(since);
    assert.deepEqual(writes.map((w) => [w.op, w.spec.holderIdentity, w.spec.leaseTransitions, w.previous?.holderIdentity, w.viaApi]), [
      ['create', 'a', 0, undefined, true],
      ['update', 'b', 1, 'a', true],
      ['update', 'c', 2, 'b', false],
      ['delete', 'c', 2, 'c', true],
    ]);
    assert.deepEqual(writes.map((w) => w.seq), [since + 1, since + 2, since + 3, since + 4]);
    assert.equal(writes[1]!.resourceVersion, renewed.metadata?.resourceVersion);
    assert.ok(writes.every((w) => w.uid === created.metadata?.uid && w.name === name && w.namespace === NS));
    assert.ok(writes.every((w, i) => i === 0 || w.at >= writes[i - 1]!.at));
    assert.equal(writes[0]!.spec.renewTime, '2026-01-01T00:00:05.456000Z');
  });

  void it('onWrite runs after the write is applied and before the reply: the writer waits, everyone else sees it', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const removeOther = server.onWrite((w) => w.name === name && w.spec.holderIdentity === 'nobody', () => assert.fail('filtered out'));
    server.onWrite(
      (w) => w.name === name && w.op === 'update',
      async (w) => {
        seen.push(`${w.spec.holderIdentity}@${w.resourceVersion}`);
        await held;
      },
      { once: true },
    );
    let answered = false;
    const renewal = api
      .replaceNamespacedLease({ name, namespace: NS, body: { ...created, spec: { ...created.spec, holderIdentity: 'b' } } })
      .finally(() => (answered = true));
    await waitUntil(() => seen.length === 1);
    // Applied: a reader sees the new holder while the writer still waits for its answer.
    const read = await api.readNamespacedLease({ name, namespace: NS });
    assert.equal(read.spec?.holderIdentity, 'b');
    assert.equal(answered, false);
    release();
    const reply = await renewal;
    assert.equal(reply.metadata?.resourceVersion, read.metadata?.resourceVersion);
    assert.deepEqual(seen, [`b@${read.metadata?.resourceVersion}`]);

    // `once`: the next update is answered at once and does not reach the handler.
    await api.replaceNamespacedLease({ name, namespace: NS, body: { ...reply, spec: { ...reply.spec, holderIdentity: 'c' } } });
    assert.equal(seen.length, 1);
    removeOther();
  });

  void it('onWrite: a handler that throws destroys the connection, and the write stays applied', async () => {
    const created = await api.createNamespacedLease({ namespace: NS, body: leaseBody(name) });
    const remove = server.onWrite((w) => w.name === name, () => {
      throw new Error('handler failed');
    });
    await assert.rejects(api.replaceNamespacedLease({ name, namespace: NS, body: { ...created, spec: { ...created.spec, holderIdentity: 'd' } } }));
    remove();
    assert.equal(server.lease(NS, name)?.spec.holderIdentity, 'd');
  });

  void it('stores core/v1 and events.k8s.io/v1 Events', async () => {
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    const created = await core.createNamespacedEvent({
      namespace: NS,
      body: { metadata: { name: `${name}.1` }, involvedObject: { kind: 'Lease', name }, reason: 'LeaderElection', message: 'hello' },
    });
    assert.match(created.metadata.uid ?? '', UUID);
    const modern = await rawRequest(server, 'POST', `/apis/events.k8s.io/v1/namespaces/${NS}/events`,
      { metadata: { name: `${name}.2` }, reason: 'LeaderElection', note: 'hi' });
    assert.equal(modern.code, 201);
    const ours = server.events().filter((e) => String(e.body.metadata.name).startsWith(`${name}.`));
    assert.deepEqual(ours.map((e) => [e.api, e.namespace, e.body.reason]),
      [['core/v1', NS, 'LeaderElection'], ['events.k8s.io/v1', NS, 'LeaderElection']]);
    assert.deepEqual(server.requests(), [], 'events are not Lease requests');
  });
});
