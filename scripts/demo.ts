/**
 * `npm run demo`: three local instances on one Redis, each with its status page and Bull Board, so you can
 * watch one lead, kill it, and see another take over. Ctrl-C stops everything.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { redisAnswers, startEmbeddedRedis } from '../src/cli/embedded-redis.js';

const redisUrl = process.env.LEASEBEAT_REDIS_URL ?? 'redis://127.0.0.1:6379';
const embedded = (await redisAnswers(redisUrl)) ? undefined : await startEmbeddedRedis(Number(new URL(redisUrl).port || 6379));
if (!(await redisAnswers(redisUrl))) {
  console.error(`no Redis at ${redisUrl} and no redis-server on PATH: install redis-server or set LEASEBEAT_REDIS_URL`);
  process.exit(1);
}
if (embedded) console.log(`started an embedded redis-server at ${embedded.url} (data in .leasebeat/redis)`);

const children: ChildProcess[] = [];
for (const [index, port] of [8081, 8082, 8083].entries()) {
  const child = spawn(process.execPath, ['bin/leasebeat.js', 'start'], {
    // Short election timings so a failover is quick to watch: a crash takes over in about 5 s.
    env: {
      LEASEBEAT_LEASE_DURATION: '4s',
      LEASEBEAT_RENEW_DEADLINE: '3s',
      LEASEBEAT_RETRY_PERIOD: '500ms',
      ...process.env,
      LEASEBEAT_REDIS_URL: redisUrl,
      LEASEBEAT_HTTP_PORT: String(port),
      LEASEBEAT_IDENTITY: `demo-${index + 1}`,
      LEASEBEAT_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(child);
  console.log(`demo-${index + 1} (pid ${child.pid}): status http://127.0.0.1:${port}/  board http://127.0.0.1:${port}/admin/queues  metrics http://127.0.0.1:${port}/metrics`);
}
console.log('The status page shows which instance leads. Try `kill <pid>` on the leader and watch another take over. Ctrl-C stops the demo.');

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await Promise.all(children.map((child) => new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', () => resolve()), child.kill('SIGTERM'))))));
  await embedded?.stop();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
