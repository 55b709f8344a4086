import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { oneLine, runCli } from '../support/cli.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { FAST_ELECTION, startInstance } from '../support/instance.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

const JOBS = new URL('../fixtures/jobs-good/', import.meta.url).pathname;

/** Issue 19, finding 5: the Kubernetes lock's configuration is checked before anything starts. */
describe('LEASEBEAT_LOCK=kubernetes without a usable kubeconfig: one line, exit 2', () => {
  let server: TestRedis;
  let home: string;
  before(async () => {
    server = await startRedis();
    // A home without ~/.kube: no kubeconfig to fall back on (and this is no pod).
    home = await mkdtemp(join(tmpdir(), 'leasebeat-home-'));
  });
  after(async () => {
    await server.close();
    await rm(home, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string>): Record<string, string> => ({
    LEASEBEAT_REDIS_URL: server.url,
    LEASEBEAT_JOBS_DIR: JOBS,
    LEASEBEAT_LOCK: 'kubernetes',
    LEASEBEAT_HTTP_PORT: '0',
    HOME: home,
    ...FAST_ELECTION,
    ...extra,
  });

  it('a KUBECONFIG that does not exist, and none at all: start and status name what is missing and the fix', async () => {
    const fix = 'set KUBECONFIG, run in a pod with a service account, or use LEASEBEAT_LOCK=redis';
    const cases: Array<{ extra: Record<string, string>; message: string }> = [
      { extra: { KUBECONFIG: '/nonexistent' }, message: `leasebeat: LEASEBEAT_LOCK=kubernetes: no kubeconfig: KUBECONFIG=/nonexistent does not exist; ${fix}` },
      // Before: an instance ran for ever against http://localhost:8080 and never led.
      { extra: { KUBECONFIG: '' }, message: `leasebeat: LEASEBEAT_LOCK=kubernetes: no kubeconfig: KUBECONFIG is unset, ${home}/.kube/config does not exist and this is not a pod with a service account; ${fix}` },
    ];
    const runs = cases.flatMap(({ extra, message }) => ['start', 'status'].map((command) => ({ command, message, run: runCli([command], { env: env(extra), timeoutMs: 30_000 }) })));
    for (const { command, message, run } of runs) {
      const result = await run;
      assert.equal(result.code, 2, `${command}: exit ${result.code}\n${result.stderr}`);
      assert.equal(oneLine(result), message, command);
    }
    const redis = server.client();
    try {
      assert.deepEqual(await redis.keys('*'), [], 'nothing connected');
    } finally {
      redis.disconnect();
    }
  });

  it('a kubeconfig that names the API server: the instance leads on its Lease', { timeout: 60_000 }, async () => {
    const api = await FakeLeaseServer.start();
    const dir = await mkdtemp(join(tmpdir(), 'leasebeat-kubeconfig-'));
    try {
      const instance = startInstance('k8s-lock-a', env({ KUBECONFIG: await api.writeKubeconfig(dir), LEASEBEAT_LEASE_NAMESPACE: 'ops' }));
      try {
        await instance.waitForLog((line) => line.msg === 'acquired the leader lease', 30_000);
      } finally {
        instance.child.kill('SIGTERM');
        assert.equal(await instance.exited(), 0, instance.stderr.join('\n'));
      }
    } finally {
      await api.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
