import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli } from '../support/cli.js';
import { startRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Issue 19, finding 9: status loads the jobs folder for next run times. A job file whose import never
 * settles used to take the whole bound, and status said Redis did not answer (exit 3). The definitions
 * now have a bound of their own: status answers from Redis, and says which folder did not load.
 */
describe('status with a job file that never finishes importing: answers from Redis, names the folder', () => {
  let server: TestRedis;
  let jobs: string;
  before(async () => {
    server = await startRedis();
    jobs = await mkdtemp(join(tmpdir(), 'leasebeat-hung-jobs-'));
    await writeFile(join(jobs, 'hangs.mjs'), "await new Promise(() => {});\nexport default { name: 'hangs', every: '5s', handler: () => 1 };\n");
    await writeFile(join(jobs, 'fine.mjs'), "export default { name: 'fine', every: '5s', handler: () => 1 };\n");
    const redis = server.client();
    await redis.hset('leasebeat:{leasebeat}:job:known-job', 'enqueued', '4', 'lastScheduledTick', '1700000000000');
    redis.disconnect();
  });
  after(async () => {
    await server.close();
    await rm(jobs, { recursive: true, force: true });
  });

  it('exit 0, the jobs from Redis, and a line saying the definitions did not load in time', { timeout: 60_000 }, async () => {
    const env = { LEASEBEAT_REDIS_URL: server.url, LEASEBEAT_JOBS_DIR: jobs, LEASEBEAT_COMMAND_TIMEOUT: '4s' };
    const [text, json] = await Promise.all([runCli(['status'], { env, timeoutMs: 30_000 }), runCli(['status', '--json'], { env, timeoutMs: 30_000 })]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^known-job .*enqueued 4/m);
    assert.match(text.stdout, new RegExp(`^error: ${jobs}: the job files did not finish loading within 2s .*leasebeat validate ${jobs}\` names the file`, 'm'));
    assert.equal(json.code, 0, json.stderr);
    const report = JSON.parse(json.stdout) as { jobs: Array<{ name: string; enqueued: number }>; jobsDir: { loaded: number; errors: string[] } };
    assert.equal(report.jobs.find((job) => job.name === 'known-job')?.enqueued, 4);
    assert.equal(report.jobsDir.loaded, 0);
    assert.equal(report.jobsDir.errors.length, 1);
  });
});
