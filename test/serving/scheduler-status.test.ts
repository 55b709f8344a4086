import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { createScheduler, type Scheduler } from '../../src/scheduler.js';
import type { HistorySnapshot } from '../../src/serving/history.js';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const JOBS = new URL('./fixtures/jobs-ticking/', import.meta.url).pathname;

/** The HTTP surface over a real scheduler: what `leasebeat start` serves (needs the Scheduler wiring of history() and metricLabels()). */
describe('the status API, history and metrics of a running scheduler', () => {
  const redis = useRedis();
  let scheduler: Scheduler;
  let server: HttpServerHandle;
  const metrics = createMetrics();

  before(async () => {
    scheduler = createScheduler({
      connection: redis.server.url,
      jobsDir: JOBS,
      identity: 'pod-live',
      election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
      members: { heartbeatIntervalMs: 200, graceMs: 1_000 },
      metrics: { election: metrics.electionMetrics, producer: metrics.producerMetrics, members: metrics.memberMetrics, workers: metrics.workerMetrics },
    });
    server = await startHttpServer({ host: '127.0.0.1', port: 0, source: scheduler, metrics });
  });
  redis.beforeClose(async () => {
    await server?.close();
    await scheduler?.stop();
  });

  it("shows the job's ticks as they run, the leader's term, and BullMQ's real completed total", { timeout: 60_000 }, async () => {
    await scheduler.start();
    const history = await until('three runs of every-second in the history', async () => {
      const response = await fetch(server.url + '/api/history');
      if (!response.ok) return undefined;
      const body = (await response.json()) as HistorySnapshot;
      const ran = body.jobs.find((job) => job.name === 'every-second')?.ticks.filter((t) => t.fate === 'ran' || t.fate === 'late') ?? [];
      return ran.length >= 3 ? body : undefined;
    }, 30_000);
    const ticks = history.jobs[0]!.ticks;
    assert.ok(ticks.every((t, i) => i === 0 || t.tick > ticks[i - 1]!.tick), 'oldest first');
    assert.ok(ticks.filter((t) => t.lagMs !== undefined).every((t) => t.lagMs! < 5_000), JSON.stringify(ticks));
    assert.equal(history.leadership.source, 'lease-history');
    assert.deepEqual(history.leadership.terms.map((t) => [t.holder, t.end]), [['pod-live', 'current']]);

    const status = (await (await fetch(server.url + '/api/status')).json()) as { cluster: { members: Array<{ identity: string; role: string }> } };
    assert.deepEqual(status.cluster.members.map((m) => [m.identity, m.role]), [['pod-live', 'leader']]);
    // The admin API over HTTP is the scheduler's own (Scheduler.admin).
    const cluster = (await (await fetch(server.url + '/api/cluster')).json()) as { leader: string | null; jobs: Array<{ name: string }> };
    assert.deepEqual([cluster.leader, cluster.jobs.map((job) => job.name)], ['pod-live', ['every-second']]);
    const text = await (await fetch(server.url + '/metrics')).text();
    const completed = Number(/^bullmq_job_completed_total\{queue="ticking"\} (\d+)$/m.exec(text)?.[1]);
    assert.ok(completed >= 3, `bullmq_job_completed_total is ${completed}`);
    // Reasons that never happened are exported at 0 rather than missing.
    for (const reason of ['paused', 'missed-window', 'catchup-limit']) {
      const line = `leasebeat_ticks_skipped_total{job="every-second",reason="${reason}"} 0`;
      assert.ok(text.split('\n').includes(line), `missing: ${line}`);
    }
    assert.ok(/^leasebeat_lease_renew_failures_total\{name="[^"]+"\} 0$/m.test(text), 'renew failures declared at 0');
    // Staged 2 s ahead, every run is added early; its start lag is what the workers observe.
    const starts = Number(/^leasebeat_run_start_lag_seconds_count (\d+)$/m.exec(text)?.[1]);
    const startLag = Number(/^leasebeat_run_start_lag_seconds_sum (\S+)$/m.exec(text)?.[1]) / starts;
    assert.ok(starts >= 3 && startLag >= 0 && startLag < 5, `run start lag: ${starts} starts, ${startLag} s on average`);

    await scheduler.admin.pause('every-second', { note: 'db migration' });
    const paused = (await (await fetch(server.url + '/api/status')).json()) as { jobs: Array<{ name: string; paused: boolean; pauseNote?: string | null }> };
    assert.deepEqual(paused.jobs.map((job) => [job.name, job.paused, job.pauseNote]), [['every-second', true, 'db migration']], 'what the page shows beside the badge');
  });
});
