/**
 * `npm run demo`: three local instances on one Redis, each with its status page and Bull Board, so you can
 * watch one lead, kill it, and see another take over. Ctrl-C stops everything, gracefully, also after one
 * of the instances was killed with `kill -9`.
 *
 * `DEMO_BASE_PORT` (default 8081) moves the three HTTP ports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { redisAnswers, startEmbeddedRedis } from '../src/cli/embedded-redis.js';

const binary = new URL('../bin/leasebeat.js', import.meta.url).pathname;
const redisUrl = process.env.LEASEBEAT_REDIS_URL ?? 'redis://127.0.0.1:6379';
const basePort = Number(process.env.DEMO_BASE_PORT ?? 8081);
/** How long an instance may take to stop gracefully before it is killed: its drain plus the lease release. */
const STOP_BUDGET_MS = 40_000;

const embedded = (await redisAnswers(redisUrl)) ? undefined : await startEmbeddedRedis(Number(new URL(redisUrl).port || 6379));
if (!(await redisAnswers(redisUrl))) {
  console.error(`no Redis at ${redisUrl} and no redis-server on PATH: install redis-server or set LEASEBEAT_REDIS_URL`);
  await embedded?.stop();
  process.exit(1);
}
if (embedded) console.log(`started an embedded redis-server at ${embedded.url} (data in .leasebeat/redis)`);

const children: ChildProcess[] = [];
for (const index of [0, 1, 2]) {
  const port = basePort + index;
  const child = spawn(process.execPath, [binary, 'start'], {
    // Short election timings so a failover is quick to watch: a crash takes over in about 5 s.
    env: {
      LEASEBEAT_LEASE_DURATION: '4s',
      LEASEBEAT_RENEW_DEADLINE: '3s',
      LEASEBEAT_RETRY_PERIOD: '500ms',
      ...process.env,
      LEASEBEAT_REDIS_URL: redisUrl,
      LEASEBEAT_HTTP_PORT: String(port),
      LEASEBEAT_IDENTITY: `demo-${index + 1}`,
      LEASEBEAT_LOG_LEVEL: process.env.LEASEBEAT_LOG_LEVEL ?? 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
    // Its own process group: Ctrl-C reaches only this script, which then sends each instance exactly one
    // SIGTERM. In the terminal's group an instance would get the SIGINT and then our SIGTERM, and take the
    // second signal as "exit now".
    detached: true,
  });
  children.push(child);
  console.log(`demo-${index + 1} (pid ${child.pid}): status http://127.0.0.1:${port}/  board http://127.0.0.1:${port}/admin/queues  metrics http://127.0.0.1:${port}/metrics`);
}
console.log('The status page shows which instance leads. Try `kill <pid>` on the leader and watch another take over. Ctrl-C stops the demo.');

/** Whether the child has ended; one killed by a signal has a `signalCode` and no `exitCode`. */
function ended(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** One SIGTERM, then SIGKILL if the instance has not stopped within the budget. */
function stopChild(child: ChildProcess): Promise<void> {
  if (ended(child)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => {
      console.error(`pid ${child.pid} did not stop within ${STOP_BUDGET_MS / 1000}s: killing it`);
      child.kill('SIGKILL');
    }, STOP_BUDGET_MS);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

let stopping = false;
const stop = async (signal: string): Promise<void> => {
  if (stopping) {
    console.error(`${signal} again: the instances are still stopping (each is killed after ${STOP_BUDGET_MS / 1000}s)`);
    return;
  }
  stopping = true;
  console.log(`${signal}: stopping the instances (each releases the lease if it leads and drains its runs)`);
  await Promise.all(children.map(stopChild));
  await embedded?.stop();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
// If every instance has ended on its own (crashed, or all killed), there is nothing left to show.
for (const child of children) {
  child.once('exit', () => {
    if (!stopping && children.every(ended)) void stop('all instances ended');
  });
}
