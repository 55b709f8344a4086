/**
 * One `leasebeat start` of a code tree, as users run it: the tree's own CLI (`bin/leasebeat.js`), its
 * settings from the environment, its jobs from a folder, the Redis lock, and its own workers.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, startRedis } from '../test/support/redis-server.js';
import { startProcess, type BenchChild } from './child.js';
import type { Tree } from './trees.js';

/** Both systems' workers take this many runs at once. */
export const WORKER_CONCURRENCY = 100;
/** leasebeat's default queue, in BullMQ's default prefix: where its runs' job hashes are. */
export const LEASEBEAT_QUEUE_KEY = 'bull:leasebeat';
const SMOKE_TIMEOUT_MS = 60_000;

export async function startLeasebeat(tree: Tree, redisUrl: string, jobsDir: string): Promise<BenchChild> {
  const env = {
    ...process.env,
    LEASEBEAT_REDIS_URL: redisUrl,
    LEASEBEAT_JOBS_DIR: jobsDir,
    LEASEBEAT_WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
    LEASEBEAT_HTTP_PORT: String(await freePort()),
    LEASEBEAT_LOG_LEVEL: 'warn',
    LEASEBEAT_LOCK: 'redis',
  };
  return startProcess(`leasebeat start of ${tree.label}`, process.execPath, [path.join(tree.dir, 'bin/leasebeat.js'), 'start'], { cwd: tree.dir, env });
}

/**
 * A jobs folder with one file exporting `count` definitions `s0…` on `schedule`, as a user with one
 * schedule per tenant writes it (`.mjs`: no tsx hooks in the measured process).
 */
export async function tenantsFolder(count: number, schedule: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-tenants-'));
  await writeFile(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  await writeFile(
    path.join(dir, 'tenants.mjs'),
    `export default Array.from({ length: ${count} }, (_, i) => ({ name: \`s\${i}\`, schedule: ${JSON.stringify(schedule)}, data: { tenant: i }, handler: () => undefined }));\n`,
  );
  return dir;
}

/** Whether the tree's `leasebeat start` runs a per-second job within a minute: undefined if it does, else why not. */
export async function runsAJob(tree: Tree): Promise<string | undefined> {
  const server = await startRedis();
  const redis = server.client();
  const dir = await tenantsFolder(1, '* * * * * *');
  let instance: BenchChild | undefined;
  try {
    instance = await startLeasebeat(tree, server.url, dir);
    const deadline = Date.now() + SMOKE_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const { exitCode, signalCode } = instance.child;
      if (exitCode !== null || signalCode !== null) return `it exited (${signalCode ?? exitCode}): ${instance.lastLine() ?? 'no output'}`;
      if ((await redis.zcard(`${LEASEBEAT_QUEUE_KEY}:completed`)) > 0) return undefined;
      await sleep(250);
    }
    return `none finished within ${SMOKE_TIMEOUT_MS / 1000} s; last output: ${instance.lastLine() ?? 'none'}`;
  } catch (error) {
    return (error as Error).message.split('\n')[0];
  } finally {
    await instance?.stop();
    redis.disconnect();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
}
