import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { JOB_DEFAULTS } from '../../src/scheduling/schema.js';
import { until } from '../support/until.js';
import { explainFailure, FAST_ELECTION, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';

const JOBS = new URL('../fixtures/jobs-staged-outage/', import.meta.url).pathname;

describe('runs staged by a leader that died before they were due (issue 19)', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  redis.beforeClose(() => killAll(instances));

  it('with every instance down across the tick, the next leader applies the pause and the catch-up policy before any worker starts them', { timeout: 90_000 }, async () => {
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_STAGE_AHEAD: '3s', ...FAST_ELECTION };
    const ledger = new TickLedger(redis.client, new KeySpace());
    const first = startInstance('first', env);
    instances.push(first);
    // Both jobs have a run staged that is due at least 1.5 s from now: then the only instance dies.
    const staged = await until('a run of each job staged well ahead of its tick', async () => {
      const ticks = await Promise.all(['kept-paused', 'no-catchup'].map(async (job) => (await ledger.jobState(job)).lastScheduledTick ?? 0));
      return ticks.every((tick) => tick > Date.now() + 1_500) && ticks;
    }, 30_000);
    first.child.kill('SIGKILL');
    await ledger.pause('kept-paused', 'paused while every instance is down');
    const [pausedTick, noCatchupTick] = staged as [number, number];
    /** What the ledger and BullMQ say of both staged runs, for the message of a failed wait. */
    const describeRuns = async (): Promise<string> => {
      const queue = new Queue(JOB_DEFAULTS.queue, { connection: redis.client });
      try {
        const lines: string[] = [];
        for (const [job, tick] of [['kept-paused', pausedTick], ['no-catchup', noCatchupTick]] as const) {
          const id = `${job}@${tick}`;
          const [taken, attempts, starts] = await redis.client.hmget(queue.toKey(id), 'ats', 'atm', 'leasebeatStarts');
          const reviewedBy = await redis.client.hget(ledger.keys.jobState(job), 'reviewedBy');
          lines.push(
            `${id}: ledger ${await ledger.tickState(job, tick)}, pending [${(await ledger.pendingTicks(job)).join(', ')}], reviewed by ${reviewedBy}; ` +
              `BullMQ ${await queue.getJobState(id)}, taken ${taken ?? 0}, attempts ${attempts ?? 0}, starts ${starts ?? 0}`,
          );
        }
        return lines.join('\n');
      } finally {
        await queue.close();
      }
    };
    // Both ticks come due with no instance alive, and the dead leader's last stamp grows old.
    await until('both ticks to be long past', () => Date.now() > Math.max(pausedTick, noCatchupTick) + 2_500, 15_000);
    const next = startInstance('next', env);
    instances.push(next);
    await explainFailure(
      until('the next leader to decide both staged runs', async () =>
        (await ledger.tickState('kept-paused', pausedTick))?.startsWith('skipped|') && (await ledger.tickState('no-catchup', noCatchupTick))?.startsWith('skipped|'),
      30_000),
      instances,
      describeRuns,
    );
    assert.equal(await ledger.tickState('kept-paused', pausedTick), 'skipped|paused');
    assert.match((await ledger.tickState('no-catchup', noCatchupTick)) ?? '', /^skipped\|(catchup-limit|missed-window)$/);
    // The next tick of the job with no catch-up runs as usual: the hold ends with the review.
    await explainFailure(
      until('a later run of no-catchup', async () =>
        (await redis.client.lrange('test:staged-outage', 0, -1)).some((run) => run.startsWith('no-catchup@') && Number(run.split('@')[1]) > noCatchupTick),
      30_000),
      instances,
      describeRuns,
    );
    const runs = await redis.client.lrange('test:staged-outage', 0, -1);
    assert.ok(!runs.includes(`kept-paused@${pausedTick}`), 'the paused job did not run its staged tick');
    assert.ok(!runs.includes(`no-catchup@${noCatchupTick}`), 'the tick that came due while no instance ran did not run');
  });
});
