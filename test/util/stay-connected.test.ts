import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { stayConnected } from '../../src/util/stay-connected.js';
import { silentLogger } from '../../src/util/logger.js';
import { RedisProcess } from '../support/redis-process.js';
import { until } from '../support/until.js';

describe('stayConnected: a client that ioredis ended without our asking is connected again', () => {
  let server: RedisProcess;

  before(async () => {
    server = await RedisProcess.start((port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
  });
  after(() => server.kill());

  it('answers again once the server is back, and stays closed once we close it', { timeout: 30_000 }, async () => {
    // No retry strategy: on a lost connection ioredis ends the client for good, as its Sentinel connector
    // does when a failover notice cuts a reconnect short.
    const client = server.client({ retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    let closing = false;
    stayConnected(client, () => closing, silentLogger);
    assert.equal(await client.ping(), 'PONG');
    await server.kill();
    await until('the client to end', () => client.status === 'end');
    await server.launch();
    await until('the client to answer again', async () => (await client.ping().catch(() => undefined)) === 'PONG');
    closing = true;
    await client.quit();
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(client.status, 'end', 'a client we closed is left closed');
  });
});
