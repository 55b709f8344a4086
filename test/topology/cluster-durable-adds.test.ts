import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { DurabilityError, ReplicaWait } from '../../src/redis/durability.js';
import { FencedEnqueue } from '../../src/producing/fenced-enqueue.js';
import { KeySpace } from '../../src/redis/keys.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import { CLUSTER_BULL_PREFIX, keySlot, RedisConnections } from '../../src/redis/redis-topology.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import type { RedisProcess } from '../support/redis-process.js';
import { useRedisCluster } from '../support/redis-cluster.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { untilAcknowledged } from '../support/acknowledged.js';
import { until } from '../support/until.js';

/**
 * BullMQ adds durable on their own shard before the ledger hears "enqueued". On Redis Cluster BullMQ's
 * slot ({leasebeat-bull}) is usually on another shard than the ledger's: a WAIT on the ledger's node says
 * nothing of the add. With the replica of BullMQ's shard frozen, an add stands on its primary alone; a
 * failover there would lose the run while the ledger says it was enqueued, and no term would add it again.
 */

const token = { generation: 'g1', leaderTransitions: 2 };
const QUEUE = 'durable-adds';

/** The ledger, every deciding write confirmed by `wait`. */
function ledgerOn(client: Redis, keys: KeySpace, wait: ReplicaWait): TickLedger {
  return new TickLedger(client, keys, wait);
}

/** The enqueue path, its BullMQ adds confirmed by `wait` on BullMQ's shard. */
function enqueueOn(ledger: TickLedger, queues: QueueSet, wait: ReplicaWait): FencedEnqueue {
  return new FencedEnqueue({ ledger, queues, token, leading: () => true, now: () => Date.now(), writes: wait });
}

describe('BullMQ adds confirmed on their own shard (Redis Cluster: 3 primaries + 3 replicas)', () => {
  const cluster = useRedisCluster();
  let client: Cluster;

  before(() => {
    client = RedisConnections.fromUrl(cluster.current.url).open('control') as Cluster;
    client.on('error', () => undefined);
  });
  cluster.beforeClose(() => client?.disconnect());

  it("with the replica of BullMQ's shard frozen, an add is not confirmed and the ledger is not told enqueued; once the replica is back it is", { timeout: 60_000 }, async () => {
    const bullSlot = keySlot(`${CLUSTER_BULL_PREFIX}:${QUEUE}:id`);
    const bullPrimary = await cluster.current.primaryOf(bullSlot);
    // A ledger (its hash tag: the cluster name) on another shard than BullMQ's.
    let keys: KeySpace | undefined;
    for (let i = 0; !keys; i++) {
      const candidate = new KeySpace('leasebeat', `durable-adds-${i}`);
      if ((await cluster.current.primaryOf(keySlot(candidate.fence))) !== bullPrimary) keys = candidate;
    }
    const ledgerPrimary = await cluster.current.primaryOf(keySlot(keys.fence));
    const [bullReplica] = await cluster.current.replicasOf(bullPrimary);
    assert.ok(bullReplica, "BullMQ's shard has a replica");
    const onBullPrimary = bullPrimary.client();
    const onLedgerPrimary = ledgerPrimary.client();

    const wait = new ReplicaWait(client, { minReplicas: 1, timeoutMs: 300 });
    const ledger = ledgerOn(client as unknown as Redis, keys, wait);
    const queues = new QueueSet({ connection: client, prefix: CLUSTER_BULL_PREFIX });
    const enqueue = enqueueOn(ledger, queues, wait);
    const job: ScheduledJob = scheduledJob({ name: 'report', every: '1s', queue: QUEUE, handler: () => undefined });
    const tick = 1_000;
    const jobId = `report@${tick}`;
    const frozen: RedisProcess = bullReplica;
    try {
      // The replicas are live here: a write they acknowledge late (a loaded machine) is made again.
      assert.deepEqual(await untilAcknowledged('the fence raise', () => ledger.raiseFence(token, 'leader', Date.now())), { ok: true });
      assert.equal((await untilAcknowledged('the claim', () => enqueue.claim('report', tick, jobId)))?.kind, 'claimed');

      frozen.freeze();
      // What the job lane does with a claimed tick: add its run, and only then tell the ledger.
      let addError: unknown;
      try {
        await enqueue.add(job, tick, jobId);
        await enqueue.confirm('report', tick, jobId);
      } catch (error) {
        addError = error;
      }
      assert.equal(await onBullPrimary.exists(`${CLUSTER_BULL_PREFIX}:${QUEUE}:${jobId}`), 1, "the add stands on BullMQ's primary");
      assert.match(
        (await onLedgerPrimary.hget(keys.ledger('report'), String(tick))) ?? '',
        /^claimed\|/,
        'the ledger is not told enqueued while the add stands on its primary alone',
      );
      assert.ok(addError instanceof DurabilityError, `the add is not confirmed: ${String(addError)}`);

      frozen.resume();
      // The lane retries the add (the job id makes it a no-op) until it is confirmed, then confirms.
      await untilAcknowledged('the add, once the replica is back', () => enqueue.add(job, tick, jobId));
      assert.match(await untilAcknowledged('the confirm', () => enqueue.confirm('report', tick, jobId)), /^(already-)?enqueued$/);
      assert.equal(await onLedgerPrimary.hget(keys.ledger('report'), String(tick)), `enqueued|${jobId}`);
      const onBullReplica = frozen.client();
      try {
        // A replica serves reads of its slots only to a connection that asked for them.
        await onBullReplica.call('READONLY');
        assert.equal(await onBullReplica.exists(`${CLUSTER_BULL_PREFIX}:${QUEUE}:${jobId}`), 1, "BullMQ's replica holds the run");
      } finally {
        onBullReplica.disconnect();
      }
    } finally {
      frozen.resume();
      onBullPrimary.disconnect();
      onLedgerPrimary.disconnect();
      await queues.close();
    }
  });

  it(
    'a deciding write on a node whose connection the Cluster client has not opened yet is confirmed like any other',
    { timeout: 30_000 },
    async () => {
      const fresh = RedisConnections.fromUrl(cluster.current.url).open('control') as Cluster;
      fresh.on('error', () => undefined);
      try {
        await until('the slot map', () => fresh.status === 'ready', 10_000);
        // A ledger on a primary this client has not talked to yet (the slot map came from another node).
        const unopened = (key: string): boolean => {
          const owner = fresh.slots[keySlot(key)]?.[0];
          return fresh.nodes('master').find((node) => `${node.options.host}:${node.options.port}` === owner)?.status === 'wait';
        };
        let keys: KeySpace | undefined;
        for (let i = 0; !keys && i < 1_000; i++) {
          const candidate = new KeySpace('leasebeat', `cold-node-${i}`);
          if (unopened(candidate.fence)) keys = candidate;
        }
        assert.ok(keys, 'a primary whose connection is not open yet');
        const ledger = ledgerOn(fresh as unknown as Redis, keys, new ReplicaWait(fresh, { minReplicas: 1, timeoutMs: 2_000 }));
        assert.deepEqual(await ledger.raiseFence(token, 'leader', Date.now()), { ok: true });
      } finally {
        fresh.disconnect();
      }
    },
  );
});
