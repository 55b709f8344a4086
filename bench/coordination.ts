import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { ChaosCluster } from '../scripts/chaos/cluster.js';
import type { ElectionTimings, LockKind } from '../scripts/chaos/plan.js';
import { HttpRequestCounter, RespCommandCounter } from './resp-counter.js';

const IDLE_JOBS = fileURLToPath(new URL('./fixtures/idle/', import.meta.url));

/** What one instance sent per minute during the window. */
export interface InstanceLoad {
  role: 'leader' | 'follower';
  apiRequestsPerMinute: number;
  redisCommandsPerMinute: number;
  /** Redis commands per minute by name, largest first. */
  redisByCommand: Array<[string, number]>;
  apiByMethod: Array<[string, number]>;
}

export interface CoordinationResult {
  lock: LockKind;
  instances: InstanceLoad[];
  /** Long-lived change-feed connections held at the end of the window, all instances together. */
  feedConnections: number;
}

/**
 * Runs `instances` idle `leasebeat start` processes (one job that is never due, so each runs its worker
 * but nothing is enqueued) and counts, per process, the requests it sends to the Lease API and the
 * commands it sends to Redis, from the bytes passing through its own proxies.
 */
export async function measureCoordination(lock: LockKind, instances: number, timings: ElectionTimings, warmupMs: number, windowMs: number): Promise<CoordinationResult> {
  const redis = Array.from({ length: instances }, () => new RespCommandCounter());
  const api = Array.from({ length: instances }, () => new HttpRequestCounter());
  const cluster = await ChaosCluster.start({
    lock,
    instances,
    jobsDir: IDLE_JOBS,
    timings,
    onRedisData: (slot, chunk, connection) => redis[slot]!.push(chunk, connection),
    onApiData: (slot, chunk) => api[slot]!.push(chunk),
  });
  try {
    cluster.startAll();
    const deadline = Date.now() + 60_000;
    while (!(await cluster.holder()) || !cluster.live().every((i) => i.instance.logs.some((l) => l.msg === 'attempting to acquire the leader lease'))) {
      if (Date.now() > deadline) throw new Error('the instances did not start campaigning within 60 s');
      await sleep(100);
    }
    await sleep(warmupMs);
    const leaderBefore = await cluster.holder();
    const redisBefore = redis.map((c) => new Map(c.byCommand));
    const apiBefore = api.map((c) => new Map(c.byMethod));
    await sleep(windowMs);
    const leader = await cluster.holder();
    // Lease watches on the API server, or Redis pub/sub subscribers (the Redis lock's feed).
    const feedConnections = cluster.api
      ? cluster.api.openWatches()
      : String(await cluster.client.call('CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n').filter((line) => line.includes('sub=')).length;
    if (!leader || leader !== leaderBefore) throw new Error(`the leader changed during the coordination window (${leaderBefore} → ${leader})`);
    const perMinute = (after: Map<string, number>, before: Map<string, number>): Array<[string, number]> =>
      [...after].map(([name, n]): [string, number] => [name, ((n - (before.get(name) ?? 0)) * 60_000) / windowMs]).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
    return {
      lock,
      feedConnections,
      instances: cluster.live().map((incarnation) => {
        const redisByCommand = perMinute(redis[incarnation.slot]!.byCommand, redisBefore[incarnation.slot]!);
        const apiByMethod = perMinute(api[incarnation.slot]!.byMethod, apiBefore[incarnation.slot]!);
        return {
          role: incarnation.identity === leader ? 'leader' : 'follower',
          redisCommandsPerMinute: redisByCommand.reduce((sum, [, n]) => sum + n, 0),
          apiRequestsPerMinute: apiByMethod.reduce((sum, [, n]) => sum + n, 0),
          redisByCommand,
          apiByMethod,
        };
      }),
    };
  } finally {
    await cluster.close();
  }
}
