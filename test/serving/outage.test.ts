import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { FAST_ELECTION, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('./fixtures/jobs-ticking/', import.meta.url).pathname;

describe('a real instance during a Redis outage', () => {
  const redis = useRedis();
  let instance: Instance;
  let url: string;

  before(async () => {
    instance = startInstance('outage-1', { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, ...FAST_ELECTION });
    url = (await instance.waitForLog((l) => l.msg === 'HTTP server listening', 60_000)).url as string;
    await instance.waitForLog((l) => l.msg === 'acquired the leader lease', 60_000);
  });
  redis.beforeClose(() => instance?.child.kill('SIGKILL'));

  it('stays ready and serves the page that explains the outage, then recovers', { timeout: 120_000 }, async () => {
    await redis.server.stop(true);
    const readiness = await until('/readyz to report Redis failing', async () => {
      const response = await fetch(`${url}/readyz`);
      const body = (await response.json()) as { checks: Array<{ name: string; ok: boolean; required?: boolean }> };
      return body.checks.some((check) => check.name === 'redis' && !check.ok) ? { status: response.status, body } : undefined;
    });
    assert.equal(readiness.status, 200, JSON.stringify(readiness.body));
    assert.deepEqual(readiness.body.checks.find((check) => check.name === 'redis')?.required, false);
    const page = await fetch(`${url}/`);
    assert.equal(page.status, 503);
    const embedded = JSON.parse(/<script type="application\/json" id="snapshot">(.*?)<\/script>/s.exec(await page.text())![1]!) as {
      outage: { problem: string; checks: Array<{ name: string; ok: boolean }> };
    };
    assert.ok(embedded.outage.problem.length > 0);
    assert.deepEqual(embedded.outage.checks.find((check) => check.name === 'redis')?.ok, false, 'the page says Redis is the problem');

    await redis.server.restart();
    await until('the page to render the status again', async () => (await fetch(`${url}/`)).status === 200, 60_000);
    assert.equal((await fetch(`${url}/readyz`)).status, 200);
  });
});
