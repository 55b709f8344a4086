import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiLeaseHistory } from '../../scripts/chaos/lease-history.js';
import { KubernetesLeaseLock } from '../../src/election/kubernetes-lock.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { createScheduler, type Scheduler } from '../../src/scheduler.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { useRedis } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

const JOBS = new URL('../fixtures/jobs-plain/', import.meta.url).pathname;
const ELECTION = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 };

describe('a leader that cannot produce gives the lease up', () => {
  const redis = useRedis();
  let api: FakeLeaseServer;

  before(async () => {
    api = await FakeLeaseServer.start();
  });
  after(() => api.close());

  function scheduler(identity: string, redisPort: number): Scheduler {
    return createScheduler({
      connection: `redis://127.0.0.1:${redisPort}`,
      jobsDir: JOBS,
      leaseName: 'cut-off',
      lock: new KubernetesLeaseLock({ namespace: 'default', name: 'cut-off', identity, kubeConfig: api.kubeConfig() }),
      election: ELECTION,
      // Only the producer matters here; the job's handler is never run.
      workers: false,
      members: { heartbeatIntervalMs: 200, graceMs: 1_000 },
    });
  }

  it('cut off from Redis while it still reaches the API server, it resigns and a healthy instance produces', { timeout: 60_000 }, async (t) => {
    const ledger = new TickLedger(redis.client, new KeySpace('leasebeat', 'cut-off'));
    const proxy = await TcpProxy.start({ port: redis.server.port });
    const a = scheduler('a', proxy.port);
    const b = scheduler('b', redis.server.port);
    try {
      await a.start();
      await until('a to lead and enqueue', async () => (await ledger.fence()).holder === 'a' && (await ledger.jobState('every-second')).enqueued >= 2, 30_000);
      await b.start();
      proxy.partition('blackhole');
      const cutAt = Date.now();
      await until('b to raise the fence', async () => (await ledger.fence()).holder === 'b', 20_000);
      const enqueuedAtCut = (await ledger.jobState('every-second')).enqueued;
      await until('b to enqueue', async () => (await ledger.jobState('every-second')).enqueued > enqueuedAtCut, 10_000);
      const tookOverMs = Date.now() - cutAt;
      t.diagnostic(`partition of the leader from Redis → next leader enqueues: ${tookOverMs} ms`);
      assert.equal(api.lease('default', 'cut-off')?.spec.holderIdentity, 'b', 'the API server shows the healthy instance as holder');
      // a gives up after RenewDeadline without Redis and releases the lease: from the API server's history,
      // b took a released lease, not one a let lapse (how soon depends on the machine's load: reported above).
      const holders = new ApiLeaseHistory(api, 'default', 'cut-off').snapshot().writes.map((write) => write.holder);
      const taken = holders.indexOf('b');
      assert.deepEqual(
        holders.slice(taken - 2, taken),
        ['a', ''],
        'the lease passed from a to b through a release',
      );
      assert.equal(a.elector.term(), undefined, 'a no longer leads');
    } finally {
      proxy.heal('reset');
      await Promise.all([a.stop(), b.stop()]);
      await proxy.close();
    }
  });
});
