/**
 * The cost of durable writes on replicated Redis (issue 13): the real fenced enqueue path (`FencedEnqueue`
 * over the ledger createScheduler builds) on a Sentinel group started here, with durability off, with
 * `WAIT 1` plus the sentinels' primary check (the Sentinel default), and with `WAIT 2` plus the check, in
 * the same run on the same group.
 */
import type { Redis } from 'ioredis';
import { replicaWaitFor } from '../src/queueing/durability.js';
import { FencedEnqueue } from '../src/queueing/fenced-enqueue.js';
import { tickJobId } from '../src/queueing/job-data.js';
import { KeySpace } from '../src/queueing/keys.js';
import { QueueSet } from '../src/queueing/queue-set.js';
import { RedisConnections } from '../src/queueing/redis-topology.js';
import { TickLedger, type FencingToken } from '../src/queueing/tick-ledger.js';
import { startSentinelGroup } from '../test/support/redis-sentinel.js';
import { cron, generateSchedules } from './schedules.js';

export interface DurabilitySetting {
  label: string;
  minReplicas: number;
  /** Single ticks one after the other: claim, add, confirm (ms per tick). */
  sequentialMs: { p50: number; p99: number };
  /** Ticks per second for a burst due together (claims and confirms batched, adds in bulk). */
  burstPerSecond: number;
  /** WAITs the burst cost. */
  burstWaits: number;
}

export interface DurabilityResult {
  settings: DurabilitySetting[];
  sequentialTicks: number;
  burst: number;
}

const SEQUENTIAL = 300;
const BURST = 5_000;
const ROUNDS = 3;
const QUEUE = 'bench-durability';
const JOB = generateSchedules(1, QUEUE, cron(() => '0 0 1 1 *')).get('s0')!;
const SETTINGS = [
  { label: 'off (minReplicas 0)', minReplicas: 0 },
  { label: 'WAIT 1 + Sentinel check (the default)', minReplicas: 1 },
  { label: 'WAIT 2 + Sentinel check (every replica)', minReplicas: 2 },
];

export async function measureDurability(log: (line: string) => void): Promise<DurabilityResult> {
  const group = await startSentinelGroup();
  const connections = RedisConnections.fromUrl(group.url);
  const redis = connections.open('control') as Redis;
  redis.on('error', () => undefined);
  const queues = new QueueSet({ connection: redis });
  const keys = new KeySpace('bench-durability');
  let base = 0;
  const fresh = (count: number): number => (base += count) - count;
  try {
    const settings: DurabilitySetting[] = [];
    for (const setting of SETTINGS) {
      const durable = replicaWaitFor(connections, redis, { minReplicas: setting.minReplicas });
      const ledger = new TickLedger(redis, keys, durable.wait);
      // A new term per setting, raised (and confirmed) like a leader's.
      const token: FencingToken = { generation: 'bench', leaderTransitions: settings.length + 1 };
      await ledger.raiseFence(token, 'bench', Date.now());
      const enqueue = new FencedEnqueue({ ledger, queues, token, leading: () => true, now: () => Date.now(), writes: durable.wait });
      const one = async (tick: number): Promise<void> => {
        const jobId = tickJobId(JOB.name, tick);
        const claim = await enqueue.claim(JOB.name, tick, jobId);
        if (claim?.kind !== 'claimed') throw new Error(`claim of tick ${tick}: ${claim?.kind ?? 'not leading'}`);
        await enqueue.add(JOB, tick, jobId);
        await enqueue.confirm(JOB.name, tick, jobId);
      };
      const latencies: number[] = [];
      const bursts: number[] = [];
      let waits = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const from = fresh(SEQUENTIAL);
        for (let i = 0; i < SEQUENTIAL; i++) {
          const started = process.hrtime.bigint();
          await one(from + i);
          latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        }
        const burstFrom = fresh(BURST);
        const waitsBefore = durable.wait.stats.waits;
        const started = process.hrtime.bigint();
        await Promise.all(Array.from({ length: BURST }, (_, i) => one(burstFrom + i)));
        bursts.push(BURST / (Number(process.hrtime.bigint() - started) / 1e9));
        waits = durable.wait.stats.waits - waitsBefore;
      }
      durable.close();
      latencies.sort((a, b) => a - b);
      const at = (q: number): number => +latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)]!.toFixed(2);
      const result = { ...setting, sequentialMs: { p50: at(0.5), p99: at(0.99) }, burstPerSecond: Math.round(bursts.sort((a, b) => a - b)[1]!), burstWaits: waits };
      log(`durability: ${setting.label}: ${JSON.stringify(result.sequentialMs)} ms per tick, burst ${result.burstPerSecond}/s with ${waits} WAITs`);
      settings.push(result);
      await queues.get(QUEUE).obliterate({ force: true });
    }
    return { settings, sequentialTicks: SEQUENTIAL * ROUNDS, burst: BURST };
  } finally {
    await queues.close();
    redis.disconnect();
    await group.close();
  }
}
