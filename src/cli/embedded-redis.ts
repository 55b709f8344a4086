import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { RedisConnections } from '../config/cli-support.js';

/** Whether a usable Redis answers at `url` within `timeoutMs` (see `RedisConnections.reach`). */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  return RedisConnections.fromUrl(url)
    .reach(timeoutMs)
    .then(
      () => true,
      () => false,
    );
}

function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A private redis-server started for a local run with no Redis configured. */
export interface EmbeddedRedis {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts a private `redis-server` on loopback `port` (the default URL's, so that further local instances
 * find it), keeping its data (AOF) in `dataDir`. Returns undefined when no redis-server is on PATH.
 */
export async function startEmbeddedRedis(port: number, dataDir = '.leasebeat/redis'): Promise<EmbeddedRedis | undefined> {
  if (!hasRedisServer()) return undefined;
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', '--maxmemory-policy', 'noeviction'],
    // Its own process group: a Ctrl-C in the terminal must not kill Redis before the instance has
    // released the lease and drained; the instance stops it last.
    { stdio: 'ignore', detached: true },
  );
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100 && !(await redisAnswers(url, 200)); i++) {
    if (child.exitCode !== null) throw new Error(`the embedded redis-server exited with code ${child.exitCode}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    stop: () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGTERM');
      }),
  };
}
