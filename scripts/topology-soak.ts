/**
 * A soak run of leasebeat on replicated Redis, with faults, until `scripts/chaos` takes `--redis`:
 *
 *   node --import tsx scripts/topology-soak.ts sentinel|cluster [minutes=10] [--durable-ledger]
 *
 * Two in-process instances (createScheduler, durable Redis lock) run three every-second jobs on three
 * queues through a `redis+sentinel://` or `redis+cluster://` URL. Every ~20 s a fault hits the primary
 * holding leasebeat's keys: a kill (restarted after the failover) or a freeze past down-after / node
 * timeout (then resumed). At the end: faults, fault → first run of a new tick, and the invariants (no
 * (job, tick) run twice; no silent gap).
 *
 * `--durable-ledger` stands in for the integration createScheduler does not have yet: it turns each
 * instance's ledger into a `DurableTickLedger` (same object, so the producer uses it too). Without it only
 * the lock is durable, which is what the scheduler can be given today.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { RedisLeaseLock } from '../src/election/redis-lock.js';
import { DurableLock, DurableTickLedger, replicaWaitFor } from '../src/queueing/durability.js';
import { KeySpace } from '../src/queueing/keys.js';
import { keySlot, RedisConnections } from '../src/queueing/redis-topology.js';
import { TickLedger } from '../src/queueing/tick-ledger.js';
import { createScheduler, type Scheduler } from '../src/scheduler.js';
import { runDetails, runs } from '../test/topology/fixtures/runs.js';
import { startRedisCluster, TEST_CLUSTER_NODE_TIMEOUT_MS } from '../test/support/redis-cluster.js';
import type { RedisProcess } from '../test/support/redis-process.js';
import { startSentinelGroup } from '../test/support/redis-sentinel.js';
import { auditTicks } from '../test/support/topology-audit.js';
import { until } from '../test/support/until.js';

const args = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const durableLedger = process.argv.includes('--durable-ledger');
const kind = args[0];
const minutes = Number(args[1] ?? 10);
if (kind !== 'sentinel' && kind !== 'cluster') throw new Error('usage: topology-soak.ts sentinel|cluster [minutes]');
const JOBS = new URL('../test/topology/fixtures/jobs/', import.meta.url).pathname;
const JOB_NAMES = ['alpha', 'beta', 'gamma'];
const LEASE = 'soak';
const keys = new KeySpace('leasebeat', LEASE);

interface Topology {
  url: string;
  primary(): Promise<RedisProcess>;
  promoted(old: RedisProcess): Promise<RedisProcess>;
  /** How long a freeze must last to be taken for a failure. */
  downAfterMs: number;
  close(): Promise<void>;
}

async function topology(): Promise<Topology> {
  if (kind === 'sentinel') {
    const group = await startSentinelGroup();
    return { url: group.url, primary: () => group.primary(), promoted: (old) => group.waitForPromotion(old), downAfterMs: group.timing.downAfterMs, close: () => group.close() };
  }
  const cluster = await startRedisCluster();
  const slot = keySlot(keys.fence);
  return { url: cluster.url, primary: () => cluster.primaryOf(slot), promoted: (old) => cluster.waitForFailover(old, slot), downAfterMs: TEST_CLUSTER_NODE_TIMEOUT_MS, close: () => cluster.close() };
}

const t = await topology();
const connections = RedisConnections.fromUrl(t.url);
const bullPrefix = connections.bullPrefix(undefined);
const instances: Array<{ scheduler: Scheduler; client: Redis; close(): void }> = [];
for (const identity of ['soak-a', 'soak-b']) {
  const client = connections.open('control') as Redis;
  client.on('error', () => undefined);
  const durability = replicaWaitFor(connections, client);
  const inner = new RedisLeaseLock({ connection: client, name: LEASE, identity });
  const scheduler = createScheduler({
    connection: client,
    lock: new DurableLock(inner, inner.key, durability.wait),
    jobsDir: JOBS,
    leaseName: LEASE,
    bullPrefix,
    election: { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 },
    members: { heartbeatIntervalMs: 1_000, graceMs: 3_000 },
  });
  if (durableLedger) {
    // A stand-in for createScheduler's missing option: the ledger the producer holds, made durable in place.
    const ledger = (scheduler as unknown as { ledger: TickLedger }).ledger;
    Object.setPrototypeOf(ledger, DurableTickLedger.prototype);
    Object.assign(ledger, { replicas: durability.wait });
  }
  await scheduler.start();
  instances.push({ scheduler, client, close: () => durability.close() });
}

const faults: Array<{ kind: string; recoveredMs: number | undefined }> = [];
const ranSince = (since: number): boolean => JOB_NAMES.every((job) => runs.some((run) => run.startsWith(`${job}@`) && Number(run.split('@')[1]) >= since));
const endAt = Date.now() + minutes * 60_000;
await until('the first runs', () => ranSince(Date.now() - 1_000), 60_000);
for (let n = 0; Date.now() < endAt - 30_000; n++) {
  await sleep(15_000 + Math.random() * 10_000);
  const old = await t.primary();
  const fault = n % 2 === 0 ? 'kill primary' : 'freeze primary past down-after';
  const at = Date.now();
  if (fault === 'kill primary') {
    await old.kill();
    await t.promoted(old);
    await old.launch();
  } else {
    old.freeze();
    await t.promoted(old);
    old.resume();
  }
  const recovered = await until('runs of new ticks', () => ranSince(at + 1_000), 60_000).then(() => Date.now() - at, () => undefined);
  faults.push({ kind: fault, recoveredMs: recovered });
  console.log(`${new Date().toISOString()} ${fault}: fault → first run of a new tick ${recovered ?? 'none within 60 s'} ms`);
}
await sleep(Math.max(0, endAt - Date.now()));
for (const instance of instances) await instance.scheduler.stop();
// A connection of its own for the audit: the instances' ones went through every fault.
const auditClient = connections.open('worker') as Redis;
auditClient.on('error', () => undefined);
const ledger = new TickLedger(auditClient, keys);
const audit = await auditTicks(ledger, JOB_NAMES, runs);
const recoveries = faults.map((f) => f.recoveredMs).filter((ms): ms is number => ms !== undefined).sort((a, b) => a - b);
console.log(JSON.stringify({
  topology: kind,
  minutes,
  durable: durableLedger ? 'lock and ledger' : 'lock only',
  faults: faults.length,
  byKind: Object.fromEntries(['kill primary', 'freeze primary past down-after'].map((k) => [k, faults.filter((f) => f.kind === k).length])),
  recoveryMs: { min: recoveries[0], median: recoveries[Math.floor(recoveries.length / 2)], max: recoveries.at(-1), unrecovered: faults.length - recoveries.length },
  term: (await ledger.fence()).leaderTransitions,
  summary: audit.summary,
  duplicates: audit.duplicates,
  duplicateRuns: runDetails.filter((detail) => audit.duplicates.some((d) => d.startsWith(`${detail.run} `))),
  silentGaps: audit.silentGaps,
}, null, 2));
auditClient.disconnect();
for (const instance of instances) {
  instance.client.disconnect();
  instance.close();
}
await t.close();
process.exit(audit.duplicates.length === 0 && audit.silentGaps.length === 0 ? 0 : 1);
