import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import { runCli, oneLine } from '../support/cli.js';
import { useRedis } from '../support/redis-server.js';
import { leadInProcess } from '../support/trigger-leader.js';
import { until } from '../support/until.js';

const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;
const keys = new KeySpace();

describe('leasebeat backfill', () => {
  const fixture = useRedis();
  let redis: Redis;
  let env: Record<string, string>;
  before(() => {
    redis = fixture.client;
    env = { LEASEBEAT_REDIS_URL: fixture.server.url, LEASEBEAT_JOBS_DIR: goodJobs };
  });

  // heartbeat ticks every 30 s; the machine's clock is the test's "now".
  const cases: Array<{ what: string; args: string[]; flag: RegExp }> = [
    { what: '--from after --to', args: ['heartbeat', '--from', '2025-06-02T00:00:00Z', '--to', '2025-06-01T00:00:00Z'], flag: /^leasebeat: --from: .*is after --to/ },
    { what: '--to in the future', args: ['heartbeat', '--from', '2025-06-01T00:00:00Z', '--to', '2999-01-01T00:00:00Z'], flag: /^leasebeat: --to: .*in the future/ },
    { what: 'a range of more than 100,000 ticks without --yes', args: ['heartbeat', '--from', '2025-01-01T00:00:00Z', '--to', '2025-06-01T00:00:00Z'], flag: /^leasebeat: --yes: .*more than 100000 ticks/ },
    { what: 'a time that is not one', args: ['heartbeat', '--from', 'yesterday', '--to', '2025-06-01T00:00:00Z'], flag: /^leasebeat: --from: "yesterday" is not a time/ },
    { what: 'a job that does not exist', args: ['no-such-job', '--from', '2025-06-01T00:00:00Z', '--to', '2025-06-01T01:00:00Z'], flag: /^leasebeat: no job named "no-such-job"/ },
    { what: 'a rate that is not one', args: ['heartbeat', '--from', '2025-06-01T00:00:00Z', '--to', '2025-06-01T01:00:00Z', '--rate', 'fast'], flag: /^leasebeat: --rate "fast": give runs a second, like 10\/s/ },
    { what: 'a rate of 0', args: ['heartbeat', '--from', '2025-06-01T00:00:00Z', '--to', '2025-06-01T01:00:00Z', '--rate', '0/s'], flag: /^leasebeat: --rate: 0 must be/ },
    { what: 'an overlap mode that is not one', args: ['heartbeat', '--from', '2025-06-01T00:00:00Z', '--to', '2025-06-01T01:00:00Z', '--overlap', 'bufferOne'], flag: /^leasebeat: --overlap "bufferOne": use one of allow, skip, bufferAll/ },
  ];
  for (const { what, args, flag } of cases) {
    it(`refuses ${what}: exit 2, one line naming the flag, nothing stored`, async () => {
      const result = await runCli(['backfill', ...args], { env });
      assert.equal(result.code, 2, result.stderr);
      assert.match(oneLine(result), flag);
      assert.deepEqual(await redis.keys('*backfill*'), []);
    });
  }

  it('runs a backfill with a leader, printing its progress and then the ticks by fate', async () => {
    // A job of its own that ticks every second, so that a leader records its first tick at once.
    const dir = await mkdtemp(join(tmpdir(), 'leasebeat-backfill-jobs-'));
    await writeFile(join(dir, 'pulse.js'), "export default { name: 'pulse', schedule: '* * * * * *', queue: 'pulse-q', handler: () => undefined };\n");
    const leader = await leadInProcess(redis, dir);
    try {
      await until('pulse to be scheduled', async () => (await redis.hget(keys.jobState('pulse'), 'lastScheduledTick')) !== null);
      const since = Number(await redis.hget(keys.jobState('pulse'), 'scheduledSince'));
      const first = Math.floor(since / 1000) * 1000 - 60_000;
      const from = new Date(first).toISOString();
      const to = new Date(first + 29_000).toISOString();
      const result = await runCli(['backfill', 'pulse', '--from', from, '--to', to, '--rate', '500/s'], { env: { ...env, LEASEBEAT_JOBS_DIR: dir } });
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stdout.trim().split('\n');
      assert.match(lines[0]!, /^backfill \S+ of pulse: 30 ticks from .* at 500\/s \(overlap allow\)/);
      assert.match(lines.at(-1)!, /^backfill \S+ of pulse done: 30 of 30 ticks enqueued; listed, not run: 0 ran before, 0 skipped/);
      const queue = new Queue('pulse-q', { connection: redis });
      try {
        const added = await queue.getJobs(['waiting']);
        assert.equal(added.filter((job) => (job.data as { backfill?: string }).backfill !== undefined).length, 30);
      } finally {
        await queue.close();
      }
      const again = await runCli(['backfill', 'pulse', '--from', from, '--to', to], { env: { ...env, LEASEBEAT_JOBS_DIR: dir } });
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout.trim().split('\n').at(-1)!, /done: 0 of 30 ticks enqueued; listed, not run: 30 ran before/);
    } finally {
      await leader.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
