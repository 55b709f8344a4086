import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Queue, Worker } from 'bullmq';
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
    // A run BullMQ holds says which term enqueued it (tickJobData's token), even before it starts.
    assert.deepEqual(formatRuns('sweep', runs), [
      `${iso(t0 + 4 * SECOND)}  enqueued  sweep@${t0 + 4 * SECOND}  waiting  term g/4`,
      `${iso(t0 + SECOND)} … ${iso(t0 + 3 * SECOND)}  skipped 3 ticks (catchup-limit)`,
      `${iso(t0)}  enqueued  sweep@${t0}  waiting  term g/4`,
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
    assert.deepEqual(formatRuns('nightly-report', [report!]), [`${report!.tick}  manual run, enqueued  ${plain.jobId}  waiting  term ${report!.term}  definition ${report!.definition}`]);
    assert.deepEqual([report!.startedAt, report!.durationMs, report!.lagMs, report!.instance, report!.attempts], [null, null, null, null, 0], 'not started: no start, duration, lag or runner');
  });

  it('describe: the definition hash the leader stamped on a run is the one the admin computes from the same file; next ticks by the schedule', async () => {
    const withJobs = createAdmin({ connection: redis.server.url, jobsDir: JOBS, timeoutMs: 10_000 });
    try {
      const { jobId } = await withJobs.trigger('nightly-report');
      const description = await withJobs.describe('nightly-report', { ticks: 3, runs: 50 });
      assert.equal(description.kind, 'job');
      assert.match(description.definition ?? '', /^sha256:[0-9a-f]{16}$/);
      assert.equal(description.runs.find((run) => run.jobId === jobId)?.definition, description.definition, 'the leader and the admin hash the same file alike');
      assert.equal(description.nextTicks.length, 3);
      const ticks = description.nextTicks.map((tick) => Date.parse(tick));
      assert.ok(ticks.every((tick, i) => i === 0 || tick > ticks[i - 1]!), `ascending: ${description.nextTicks.join(', ')}`);
      assert.equal(description.next, description.nextTicks[0]);
      assert.equal(description.failedInARow, 0);
      // Only Redis: the definition is unknown here, its runs are not.
      const bare = await admin.describe('nightly-report');
      assert.deepEqual([bare.definition, bare.nextTicks, bare.schedule], [null, [], null]);
      assert.ok(bare.runs.some((run) => run.jobId === jobId));
      await assert.rejects(withJobs.describe('no-such-job'), (error: Error & { code?: string }) => error.code === 'unknown-job' && /no job named "no-such-job"/.test(error.message));
    } finally {
      await withJobs.close();
    }
  });

  it('`leasebeat describe` prints the description; an unknown name is one line and a failure', async () => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS };
    const json = await runCli(['describe', 'nightly-report', '--json', '--ticks', '2'], { env });
    assert.equal(json.code, 0, json.stderr);
    const description = JSON.parse(json.stdout) as Awaited<ReturnType<Admin['describe']>>;
    assert.equal(description.nextTicks.length, 2);
    const text = await runCli(['describe', 'nightly-report', '--ticks', '2'], { env });
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trimEnd().split('\n');
    assert.match(lines[1]!, new RegExp(`^  job  30 2 \\* \\* \\*  .*definition ${description.definition}$`));
    assert.match(lines.find((line) => line.startsWith('  next'))!, /^ {2}next 2 ticks:$/);
    const unknown = await runCli(['describe', 'no-such-job'], { env });
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr.trim(), /^leasebeat: no job named "no-such-job"/);
    assert.equal(unknown.stderr.trim().split('\n').length, 1);
    const bad = await runCli(['describe', 'nightly-report', '--ticks', 'many'], { env });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--ticks "many" must be a whole number/);
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

  it("a failed run says why, as BullMQ recorded it: on one line in the listing, cut at 500 characters", async () => {
    // Runs the two `sweep` runs in `ops`: the older fails with a two-line message, the newer with a huge one.
    const long = 'x'.repeat(2_000);
    const worker = new Worker('ops', (job) => Promise.reject(new Error(job.id === `sweep@${t0}` ? 'disk full\n  on /var' : long)), { connection: redis.server.client() });
    try {
      await until('both runs to fail', async () => (await ops.getFailedCount()) === 2, 10_000);
    } finally {
      await worker.close();
    }
    const failed = (await admin.runs('sweep')).filter((run) => run.jobId);
    assert.deepEqual(failed.map((run) => [run.jobId, run.state, run.error]), [
      [`sweep@${t0 + 4 * SECOND}`, 'failed', `${'x'.repeat(499)}…`],
      [`sweep@${t0}`, 'failed', 'disk full\n  on /var'],
    ]);
    assert.match(formatRuns('sweep', failed).at(-1)!, new RegExp(`^${new Date(t0).toISOString()}  enqueued  sweep@${t0}  failed  .*  error: disk full on /var$`));
  });

  it('still refuses a name nothing is recorded for', async () => {
    await assert.rejects(admin.runs('no-such-job'), /no job named "no-such-job" is known to the cluster/);
    assert.deepEqual(formatRuns('quiet', []), ['quiet: nothing recorded yet (no tick, skipped range or manual run)']);
  });
});
