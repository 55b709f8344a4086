import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { runTraced } from '../support/module-trace.js';

// Importing @kubernetes/client-node costs about 70 MiB of RSS and a second of start-up. Only a
// Kubernetes lock's first call may load it: not the library's entry point, not the CLI, not
// constructing the lock. Each check runs in a fresh process whose module resolutions are traced.

const CLIENT_NODE = '/node_modules/@kubernetes/client-node/';

/**
 * Imports the library, constructs a Kubernetes lock without a kubeConfig, then uses it against the
 * fake API server named by $KUBECONFIG: a 404, a create, a 409. Prints what it saw as JSON.
 */
const CHILD = `
import { readFileSync } from 'node:fs';
const loaded = () => readFileSync(process.env.LEASEBEAT_MODULE_TRACE, 'utf8').includes(${JSON.stringify(CLIENT_NODE)});
const lib = await import('./src/index.ts');
const afterImport = loaded();
const lock = new lib.KubernetesLeaseLock({ namespace: 'lazy', name: 'leader', identity: 'a' });
const afterConstruct = loaded();
const signal = () => AbortSignal.timeout(10_000);
const kind = (promise) => promise.then(() => 'ok', (error) => error.constructor.name);
const record = { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: 1, renewTime: 2, leaderTransitions: 0 };
const missing = await kind(lock.get(signal()));
await lock.create(record, signal());
const conflict = await kind(lock.create(record, signal()));
const holder = (await lock.get(signal())).record.holderIdentity;
console.log(JSON.stringify({ afterImport, afterConstruct, afterUse: loaded(), missing, conflict, holder }));
`;

void describe('@kubernetes/client-node loads only when a Kubernetes lock is used', () => {
  let server: FakeLeaseServer;
  let dir: string;
  let kubeconfig: string;

  before(async () => {
    server = await FakeLeaseServer.start();
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-lazy-k8s-'));
    kubeconfig = await server.writeKubeconfig(dir);
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  void it('not by importing the library or constructing the lock; its first call loads it and classifies API errors as before', { timeout: 60_000 }, async () => {
    const run = await runTraced(['--input-type=module', '-e', CHILD], { env: { KUBECONFIG: kubeconfig } });
    assert.equal(run.code, 0, run.stderr);
    const seen = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.deepEqual(seen, {
      afterImport: false,
      afterConstruct: false,
      // The trace does see the package once it is imported: the two checks above are not vacuous.
      afterUse: true,
      missing: 'LockNotFoundError',
      conflict: 'LockConflictError',
      holder: 'a',
    });
  });

  void it('not by the CLI on the Redis lock (validate, the job files of the image)', { timeout: 60_000 }, async () => {
    // bin/leasebeat.js picks dist/ or the sources through tsx itself, as it does for `npm start`.
    const run = await runTraced(['bin/leasebeat.js', 'validate', 'jobs', '--count', '1'], { tsx: false, env: { LEASEBEAT_LOCK: 'redis' } });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(run.resolved.some((url) => /\/(src\/cli\/main\.ts|dist\/cli\/main\.js)$/.test(url)), `the trace missed the CLI:\n${run.resolved.join('\n')}`);
    assert.ok(run.resolved.some((url) => /\/(src\/index\.ts|dist\/index\.js)$/.test(url)), 'the trace missed the library');
    assert.deepEqual(run.resolved.filter((url) => url.includes(CLIENT_NODE)), []);
  });
});
