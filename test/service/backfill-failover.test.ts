import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { createAdmin, type BackfillProgress } from '../../src/index.js';
import { FAST_ELECTION, explainFailure, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('../fixtures/jobs-backfill/', import.meta.url).pathname;
const JOB = 'every-second';
const LEASE_KEY = 'leasebeat:{leasebeat}:lease';
const TICKS = 300;
/** One tick a claim (30/s), and batches of 10 (200/s: overlap allow claims rate/20 a script), pending at the kill. */
const RATES = [30, 200];

describe('backfill across a SIGKILL of the leader: two real `leasebeat start` processes on one Redis', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  redis.beforeClose(() => killAll(instances));
  // Each rate on an empty Redis, with instances of its own: the last one's survivor is gone before the flush.
  beforeEach(async () => {
    killAll(instances);
    await Promise.all(instances.splice(0).map((instance) => instance.exited()));
    await redis.client.flushall();
  });

  for (const rate of RATES) it(`at ${rate}/s, the next leader resumes where the killed one stood: every tick of the range runs once, none is lost`, { timeout: 120_000 }, async () => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_SHUTDOWN_TIMEOUT: '5s', ...FAST_ELECTION };
    for (const id of ['a', 'b']) instances.push(startInstance(`bf-${id}`, env));
    const state = `leasebeat:{leasebeat}:job:${JOB}`;
    await explainFailure(until('a leader to schedule the job', async () => !(await redis.client.hmget(state, 'scheduledSince', 'lastScheduledTick')).includes(null), 60_000), instances);
    // The range: the 300 seconds before the job was first scheduled (no record, never run).
    const since = Number(await redis.client.hget(state, 'scheduledSince'));
    const to = Math.floor((since - 1) / 1000) * 1000;
    const from = to - (TICKS - 1) * 1000;
    const admin = createAdmin({ connection: redis.server.url, jobsDir: JOBS });
    try {
      const { id } = await admin.backfill(JOB, { from, to, rate, by: 'tester' });
      const progress = async (): Promise<BackfillProgress> => (await admin.backfills(JOB)).find((b) => b.id === id)!;
      // A third of the way, the leader dies mid-backfill: its cursor and its pending claim are all that is left.
      await explainFailure(until('a third of the backfill', async () => (await progress()).done >= TICKS / 3, 60_000, 20), instances);
      const holder = await redis.client.hget(LEASE_KEY, 'holderIdentity');
      const killed = instances.find((i) => i.identity === holder);
      assert.ok(killed, `the leader ${holder} is one of the instances`);
      killed.child.kill('SIGKILL');
      const killedPid = String(killed.child.pid);
      const ended = await explainFailure(until('the backfill to end under the next leader', async () => {
        const now = await progress();
        return now.state === 'done' || now.state === 'failed' ? now : undefined;
      }, 90_000, 100), instances);
      assert.equal(ended.state, 'done', ended.error);
      assert.equal(ended.done, TICKS);
      // Ground truth: what each tick's runs recorded, whichever process ran them (the survivor runs them all in the end).
      await until('every tick of the range to have run', async () => {
        const counts = await Promise.all(Array.from({ length: TICKS }, (_, k) => redis.client.llen(`test:runners:${from + k * 1000}`)));
        return counts.every((n) => n >= 1);
      }, 60_000, 200);
      const problems: string[] = [];
      for (let k = 0; k < TICKS; k++) {
        const tick = from + k * 1000;
        const runners = await redis.client.lrange(`test:runners:${tick}`, 0, -1);
        if (runners.some((runner) => !runner.endsWith('|backfill'))) problems.push(`tick ${tick} ran as a live tick: ${runners.join(', ')}`);
        // A second run is allowed only where the first runner's process died (BullMQ's stalled-run recovery).
        if (runners.length > 1 && !(runners.length === 2 && runners[0]!.startsWith(`${killedPid}|`))) problems.push(`tick ${tick} ran ${runners.length} times: ${runners.join(', ')}`);
      }
      assert.deepEqual(problems, []);
      const [record] = (await admin.history(JOB, { limit: 1 })).filter((entry) => entry.action === 'backfill');
      assert.equal(record?.by, 'tester');
    } finally {
      await admin.close();
    }
  });
});
