import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { until } from '../support/until.js';
import { FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';

const JOBS = new URL('../fixtures/jobs-isolation/', import.meta.url).pathname;

describe('two deployments on one Redis (issue 19)', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  redis.beforeClose(() => killAll(instances));

  it('with different prefixes share nothing: each runs only its own runs, each (job, tick) once per deployment', { timeout: 60_000 }, async () => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_SHUTDOWN_TIMEOUT: '2s', ...FAST_ELECTION };
    instances.push(startInstance('default-a', env), startInstance('default-b', env));
    instances.push(startInstance('iso-a', { ...env, LEASEBEAT_PREFIX: 'iso' }), startInstance('iso-b', { ...env, LEASEBEAT_PREFIX: 'iso' }));
    const records = async (): Promise<Array<{ runner: string; queue: string; run: string }>> =>
      (await redis.client.lrange('test:isolation', 0, -1)).map((line) => {
        const [runner, queue, run] = line.split('|') as [string, string, string];
        return { runner, queue, run };
      });
    await until('both deployments to run a few ticks', async () => {
      const seen = await records();
      return seen.filter((r) => r.runner === 'iso').length >= 4 && seen.filter((r) => r.runner === 'leasebeat').length >= 4;
    }, 40_000);
    const seen = await records();
    const foreign = seen.filter((r) => r.queue !== (r.runner === 'iso' ? 'iso-bull:leasebeat' : 'bull:leasebeat'));
    assert.deepEqual(foreign, [], "no deployment ran the other's runs");
    for (const runner of ['iso', 'leasebeat']) {
      const runs = seen.filter((r) => r.runner === runner).map((r) => r.run);
      assert.equal(new Set(runs).size, runs.length, `${runner}: each run once`);
    }
    assert.equal(await redis.client.exists('iso:{leasebeat}:lease', 'leasebeat:{leasebeat}:lease'), 2, 'two elections');
  });
});
