import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { useRedis } from '../support/redis-server.js';
import { fixedSource, sampleSnapshot } from './fixture.js';

/** Every answer of the status endpoints goes through Redis here, as the scheduler's do. */
describe('the status endpoints with Redis hung', () => {
  const redis = useRedis();
  let admin: Redis;
  let server: HttpServerHandle;

  before(async () => {
    await redis.client.ping(); // connected before a test pauses the server, as the scheduler's connection is
    admin = redis.server.client();
    const source = fixedSource([]);
    source.status = async () => (await redis.client.ping(), sampleSnapshot());
    source.readiness = async () => [{ name: 'redis', ok: (await redis.client.ping()) === 'PONG' }];
    source.history = async () => {
      await redis.client.ping();
      return { generatedAt: 0, lateAfterMs: 1000, jobs: [], leadership: { source: 'none', terms: [] } };
    };
    server = await startHttpServer({ host: '127.0.0.1', port: 0, source, metrics: createMetrics(), requestTimeoutMs: 300 });
  });
  redis.beforeClose(async () => {
    await server.close();
    await admin.quit();
  });

  it('answers 503 naming what timed out, within the bound, instead of hanging', async () => {
    // The server holds every command for 3 s: a Redis that stopped answering (SIGSTOP), without killing it.
    await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
    const started = Date.now();
    const [status, page, ready, history] = await Promise.all(['/api/status', '/', '/readyz', '/api/history'].map((path) => fetch(server.url + path)));
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 2_500, `answered after ${elapsed} ms`);
    assert.equal(status!.status, 503);
    assert.deepEqual(await status!.json(), { error: 'the status (Redis and the lease) timed out after 300 ms' });
    assert.equal(page!.status, 503);
    // The page itself, saying what did not answer, with this instance's checks (which could not answer either).
    const html = await page!.text();
    const embedded = JSON.parse(/<script type="application\/json" id="snapshot">(.*?)<\/script>/s.exec(html)![1]!) as { status: unknown; outage: unknown };
    assert.equal(embedded.status, null);
    assert.deepEqual(embedded.outage, {
      problem: 'the status (Redis and the lease) timed out after 300 ms',
      checks: [{ name: 'readiness', ok: false, detail: 'the readiness checks timed out after 300 ms' }],
    });
    assert.equal(ready!.status, 503);
    assert.deepEqual(await ready!.json(), { status: 'not ready', checks: [{ name: 'readiness', ok: false, detail: 'the readiness checks timed out after 300 ms' }] });
    assert.equal(history!.status, 503);
  });
});
