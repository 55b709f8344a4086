import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { createAdmin, formatRuns, type Admin, type RecentRun } from '../../src/admin/admin.js';
import { tickJobId } from '../../src/ledger/job-data.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { runCli } from '../support/cli.js';
import { useRedis } from '../support/redis-server.js';
import { tickJobData } from '../support/scheduled-job.js';
import { until } from '../support/until.js';
import { leadInProcess } from '../support/trigger-leader.js';

const JOBS = new URL('../fixtures/jobs-good/', import.meta.url).pathname;
const SECOND = 1_000;

describe('runs: the ticks, skipped ranges and manual runs of a job, each run with its BullMQ state as Redis has it', () => {
  const redis = useRedis();
  let leader: Awaited<ReturnType<typeof leadInProcess>>;
  /** No jobs folder: as from a machine or folder without jobs/, every answer must come from Redis. */
  let admin: Admin;
  let elsewhere: string;
  let ops: Queue;
  /** The ticks of `sweep` as recorded: one run, three skipped beyond the catch-up limit, one run. */
  const t0 = Date.UTC(2026, 0, 1, 12);

  before(async () => {
    leader = await leadInProcess(redis.client, JOBS);
    admin = createAdmin({ connection: redis.server.url, timeoutMs: 10_000 });
    elsewhere = await mkdtemp(join(tmpdir(), 'leasebeat-runs-'));
    ops = new Queue('ops', { connection: redis.client });

    // `sweep`, a job this leader does not load, recorded through the ledger's own scripts under its term,
    // its runs added to a queue of its own, which only BullMQ's keys name.
    const ledger = new TickLedger(redis.client, new KeySpace());
    const token = { generation: 'test-gen', leaderTransitions: 1 };
    await until('the leader to raise its fence', async () => (await ledger.fence()).generation === token.generation);
    const run = async (tick: number, previousTick?: number): Promise<void> => {
      const jobId = tickJobId('sweep', tick);
      assert.equal((await ledger.claim(token, 'sweep', tick, jobId, previousTick === undefined ? {} : { previousTick })).kind, 'claimed');
      await ops.add('sweep', tickJobData({}, tick), { jobId });
      assert.equal(await ledger.confirm(token, 'sweep', tick, jobId, tick + 5), 'enqueued');
    };
    await run(t0);
    assert.equal(await ledger.skipRange(token, 'sweep', { from: t0 + SECOND, to: t0 + 3 * SECOND, count: 3, reason: 'catchup-limit' }), 'recorded');
    await run(t0 + 4 * SECOND, t0 + 3 * SECOND);
  });
  redis.beforeClose(async () => {
    await admin?.close();
    await ops?.close();
    await leader?.stop();
  });
  after(() => rm(elsewhere, { recursive: true, force: true }));

  const shape = (run: RecentRun) => [run.kind, run.tick, run.to, run.count, run.fate, run.reason, run.jobId, run.queue, run.state];

  it('lists a range of skipped ticks beside the single ticks, newest first: the ticks status counts', async () => {
    const iso = (ms: number) => new Date(ms).toISOString();
    const runs = await admin.runs('sweep', { limit: 50 });
    assert.deepEqual(runs.map(shape), [
      ['tick', iso(t0 + 4 * SECOND), null, 1, 'enqueued', null, `sweep@${t0 + 4 * SECOND}`, 'ops', 'waiting'],
      ['range', iso(t0 + SECOND), iso(t0 + 3 * SECOND), 3, 'skipped', 'catchup-limit', null, null, null],
      ['tick', iso(t0), null, 1, 'enqueued', null, `sweep@${t0}`, 'ops', 'waiting'],
    ]);
    assert.deepEqual((await admin.status()).jobs.find((job) => job.name === 'sweep')?.skipped, { 'catchup-limit': 3 });
    assert.deepEqual(formatRuns('sweep', runs), [
      `${iso(t0 + 4 * SECOND)}  enqueued  sweep@${t0 + 4 * SECOND}  waiting`,
      `${iso(t0 + SECOND)} … ${iso(t0 + 3 * SECOND)}  skipped 3 ticks (catchup-limit)`,
      `${iso(t0)}  enqueued  sweep@${t0}  waiting`,
    ]);
    assert.deepEqual((await admin.runs('sweep', { limit: 2 })).map((run) => run.kind), ['tick', 'range'], 'the limit counts a range as one entry');
  });

  it('lists a triggered run with its BullMQ state, found in its own queue or the default one', async () => {
    const flow = await admin.trigger('fan-out');
    const plain = await admin.trigger('nightly-report');
    const manual = async (job: string) => (await admin.runs(job)).filter((run) => run.kind === 'manual');
    const [fanOut] = await manual('fan-out');
    assert.deepEqual(shape(fanOut!).slice(2), [null, 1, 'enqueued', null, flow.jobId, 'etl', 'waiting-children'], 'a flow parent waits for its children');
    const [report] = await manual('nightly-report');
    assert.deepEqual(shape(report!).slice(2), [null, 1, 'enqueued', null, plain.jobId, 'leasebeat', 'waiting']);
    assert.ok(Math.abs(Date.parse(report!.tick) - Date.now()) < 60_000, `placed at its add time: ${report!.tick}`);
    assert.deepEqual(formatRuns('nightly-report', [report!]), [`${report!.tick}  manual run, enqueued  ${plain.jobId}  waiting`]);
  });

  it('`leasebeat runs` from a folder without jobs/ still gives each run its BullMQ state', async () => {
    const result = await runCli(['runs', 'sweep', '--json'], { env: { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: '' }, cwd: elsewhere });
    assert.equal(result.code, 0, result.stderr);
    const runs = JSON.parse(result.stdout) as RecentRun[];
    assert.deepEqual(runs.filter((run) => run.jobId).map((run) => [run.jobId, run.queue, run.state]), [
      [`sweep@${t0 + 4 * SECOND}`, 'ops', 'waiting'],
      [`sweep@${t0}`, 'ops', 'waiting'],
    ]);
    const text = await runCli(['runs', 'sweep'], { env: { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: '' }, cwd: elsewhere });
    assert.equal(text.code, 0, text.stderr);
    assert.deepEqual(text.stdout.trimEnd().split('\n'), formatRuns('sweep', runs));
  });

  it('still refuses a name nothing is recorded for', async () => {
    await assert.rejects(admin.runs('no-such-job'), /no job named "no-such-job" is known to the cluster/);
    assert.deepEqual(formatRuns('quiet', []), ['quiet: nothing recorded yet (no tick, skipped range or manual run)']);
  });
});
