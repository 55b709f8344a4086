import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { oneLine, runCli } from '../support/cli.js';
import { FAST_ELECTION, startInstance, type Instance } from '../support/instance.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

const JOBS = new URL('../fixtures/jobs-isolation/', import.meta.url).pathname;

describe('a deployment that cannot be honoured stops before it starts (issue 19)', () => {
  let server: TestRedis;
  const instances: Instance[] = [];

  before(async () => {
    server = await startRedis();
  });
  after(async () => {
    for (const instance of instances) instance.child.kill('SIGKILL');
    await server.close();
  });

  const env = (extra: Record<string, string> = {}): Record<string, string> => ({
    LEASEBEAT_REDIS_URL: server.url,
    LEASEBEAT_JOBS_DIR: JOBS,
    LEASEBEAT_SHUTDOWN_TIMEOUT: '2s',
    LEASEBEAT_HTTP_PORT: '0',
    ...FAST_ELECTION,
    ...extra,
  });

  it('a database the server does not have: start and status exit 2 with one line, and nothing is written to database 0', async () => {
    const url = `${server.url}/99`;
    const start = await runCli(['start'], { env: env({ LEASEBEAT_REDIS_URL: url }), timeoutMs: 30_000 });
    assert.equal(start.code, 2, start.stderr);
    assert.match(oneLine(start), /database 99 cannot be used on this server \(ERR DB index is out of range\)/);
    const status = await runCli(['status'], { env: env({ LEASEBEAT_REDIS_URL: url }), timeoutMs: 30_000 });
    assert.equal(status.code, 2, status.stderr);
    assert.match(oneLine(status), /database 99 cannot be used/);
    const client = server.client();
    try {
      assert.deepEqual(await client.keys('*'), [], 'database 0 untouched');
    } finally {
      client.disconnect();
    }
  });

  it('a second deployment on the BullMQ prefix of a running one is refused in one line; once the first stops cleanly, it starts', { timeout: 60_000 }, async () => {
    const first = startInstance('first-a', env({ LEASEBEAT_PREFIX: 'one', LEASEBEAT_BULL_PREFIX: 'shared' }));
    instances.push(first);
    await first.waitForLog((line) => line.msg === 'jobs loaded');
    // Another key prefix on the same queues (an explicit pair), and the same key prefix under another lease name.
    const others: Array<Record<string, string>> = [
      { LEASEBEAT_PREFIX: 'two', LEASEBEAT_BULL_PREFIX: 'shared' },
      { LEASEBEAT_PREFIX: 'one', LEASEBEAT_BULL_PREFIX: 'shared', LEASEBEAT_LEASE_NAME: 'other' },
    ];
    for (const other of others) {
      const second = await runCli(['start'], { env: env({ ...other, LEASEBEAT_IDENTITY: 'second' }), timeoutMs: 30_000 });
      assert.equal(second.code, 2, second.stderr);
      assert.match(oneLine(second), /BullMQ prefix "shared" is in use by another leasebeat deployment \(prefix\/lease one\/leasebeat, instance first-a, \d+ s ago\).*LEASEBEAT_PREFIX/);
    }
    first.child.kill('SIGTERM');
    assert.equal(await first.exited(), 0);
    const next = startInstance('two-a', env({ LEASEBEAT_PREFIX: 'two', LEASEBEAT_BULL_PREFIX: 'shared' }));
    instances.push(next);
    await next.waitForLog((line) => line.msg === 'jobs loaded');
  });
});
