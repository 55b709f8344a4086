import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { FAST_ELECTION, startInstance, type Instance } from '../support/instance.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Issue 19, finding 8: Ctrl-C on `npm start` reaches node twice within milliseconds (from the terminal's
 * process group, and forwarded by npm). That is one request to stop: the instance drains its active run
 * and exits 0. Only a second signal a second or more later abandons the drain.
 */
describe('a repeated signal within a second is the same request to stop: the drain goes on', () => {
  let server: TestRedis;
  let jobs: string;
  before(async () => {
    server = await startRedis();
    jobs = await mkdtemp(join(tmpdir(), 'leasebeat-signals-'));
    // A run that outlasts the signals (SLOW_RUN_MS long); it says when it starts and when it is done.
    await writeFile(
      join(jobs, 'slow.mjs'),
      "export default { name: 'slow', every: '1s', overlap: 'skip', handler: async (job, ctx) => {\n" +
        "  ctx.log.info('slow run started');\n  await new Promise((resolve) => setTimeout(resolve, Number(process.env.SLOW_RUN_MS)));\n" +
        "  ctx.log.info('slow run finished');\n} };\n",
    );
  });
  after(async () => {
    await server.close();
    await rm(jobs, { recursive: true, force: true });
  });

  const instance = (identity: string, prefix: string, runMs: number): Instance =>
    startInstance(identity, {
      ...FAST_ELECTION, LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: jobs, LEASEBEAT_PREFIX: prefix, LEASEBEAT_SHUTDOWN_TIMEOUT: '30s', SLOW_RUN_MS: String(runMs),
    });

  it('SIGINT twice, milliseconds apart, to an instance with an active run: it drains the run and exits 0', { timeout: 60_000 }, async () => {
    const a = instance('signals-a', 'sig-a', 5_000);
    try {
      await a.waitForLog((line) => line.msg === 'slow run started', 30_000);
      a.child.kill('SIGINT');
      // The second as soon as the first has arrived (sent together, the kernel would merge them into one),
      // as npm's copy follows the terminal's: milliseconds later.
      await a.waitForLog((line) => line.msg === 'stopping');
      a.child.kill('SIGINT');
      assert.equal(await a.exited(), 0, a.stderr.join('\n'));
      const messages = a.logs.map((line) => line.msg);
      assert.ok(!messages.includes('second signal: exiting now'), messages.join('\n'));
      // Drained: the run active at the signals finished after them, and every run that started finished.
      assert.ok(messages.lastIndexOf('slow run finished') > messages.indexOf('stopping'), messages.join('\n'));
      assert.equal(messages.filter((m) => m === 'slow run started').length, messages.filter((m) => m === 'slow run finished').length);
      assert.ok(messages.includes('shut down'));
    } finally {
      a.child.kill('SIGKILL');
    }
  });

  it('a second signal a second or more after the first still exits at once', { timeout: 60_000 }, async () => {
    // A run far longer than the test: only the second signal can end the process.
    const b = instance('signals-b', 'sig-b', 25_000);
    try {
      await b.waitForLog((line) => line.msg === 'slow run started', 30_000);
      b.child.kill('SIGINT');
      await b.waitForLog((line) => line.msg === 'stopping');
      // The interval itself, not a wait for a state: the rule is about time between two signals.
      await sleep(1_200);
      b.child.kill('SIGINT');
      assert.equal(await b.exited(), 1);
      assert.ok(b.logs.some((line) => line.msg === 'second signal: exiting now'));
    } finally {
      b.child.kill('SIGKILL');
    }
  });
});
