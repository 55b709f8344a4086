import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../support/redis-server.js';
import { alive } from '../support/process.js';
import { until } from '../support/until.js';

const demo = new URL('../../scripts/demo.ts', import.meta.url).pathname;
const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;

async function answers(url: string): Promise<boolean> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 500, commandTimeout: 500 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

describe('npm run demo', () => {
  it('after kill -9 of one instance, Ctrl-C stops the others gracefully (one signal each) and the embedded Redis', { timeout: 180_000 }, async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'leasebeat-demo-'));
    const redisUrl = `redis://127.0.0.1:${await freePort()}`;
    // Its own process group, as a terminal's foreground job: Ctrl-C is a SIGINT to the whole group.
    // tsx by its resolved URL: `--import tsx` would resolve it from the temporary working directory.
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), demo], {
      cwd,
      env: { ...process.env, LEASEBEAT_REDIS_URL: redisUrl, LEASEBEAT_JOBS_DIR: goodJobs, DEMO_BASE_PORT: String(await freePort()), LEASEBEAT_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    try {
      await until('the demo to print its three instances', () => (output.match(/demo-\d \(pid \d+\)/g)?.length ?? 0) === 3 || undefined, 60_000);
      await redis.connect();
      await until('three members registered', async () => (await redis.hlen('leasebeat:{leasebeat}:members')) === 3 || undefined, 60_000);
      const victim = Number(/demo-2 \(pid (\d+)\)/.exec(output)![1]);
      process.kill(victim, 'SIGKILL');
      // Until the demo has reaped it (a zombie still answers signal 0), so Ctrl-C comes after the demo saw it end.
      await until('the demo to reap the killed instance', () => !alive(victim) || undefined);
      process.kill(-child.pid!, 'SIGINT');
      const code = await Promise.race([exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 90_000).unref())]);
      assert.equal(code, 0, `the demo did not exit cleanly (${code}):\n${output}`);
      assert.doesNotMatch(output, /second signal/, 'an instance got two signals');
      assert.equal(await answers(redisUrl), false, 'the embedded redis-server is still running');
    } finally {
      redis.disconnect();
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
      await rm(cwd, { recursive: true, force: true });
    }
  });
});
