import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { mergeExpositions, scrapeMetrics } from '../../src/serving/exposition.js';
import { createMetrics, SKIP_REASONS } from '../../src/serving/metrics.js';
import { startRedis } from '../support/redis-server.js';
import { startQueueWorld, type QueueWorld } from './fixture.js';

/** The sample lines of one metric family, without HELP/TYPE. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('createMetrics', () => {
  it('exports the Kubernetes leader-election metrics through the elector hooks', async () => {
    const { registry, electionMetrics } = createMetrics();
    electionMetrics.leaderOff('leasebeat');
    assert.deepEqual(samples(await registry.metrics(), 'leader_election_master_status'), [
      'leader_election_master_status{name="leasebeat"} 0',
    ]);

    electionMetrics.leaderOn('leasebeat');
    electionMetrics.slowpathExercised('leasebeat');
    electionMetrics.slowpathExercised('leasebeat');
    electionMetrics.renewFailed?.('leasebeat');
    electionMetrics.leaderOff('leasebeat');
    electionMetrics.leaderOn('leasebeat');
    const text = await registry.metrics();
    assert.deepEqual(samples(text, 'leader_election_master_status'), ['leader_election_master_status{name="leasebeat"} 1']);
    assert.deepEqual(samples(text, 'leader_election_slowpath_total'), ['leader_election_slowpath_total{name="leasebeat"} 2']);
    assert.deepEqual(samples(text, 'leasebeat_lease_renew_failures_total'), ['leasebeat_lease_renew_failures_total{name="leasebeat"} 1']);
    assert.deepEqual(samples(text, 'leasebeat_leader_transitions_total'), ['leasebeat_leader_transitions_total 2']);
    assert.match(text, /# TYPE leader_election_master_status gauge/);
    assert.match(text, /# TYPE leader_election_slowpath_total counter/);
  });

  it('exports the producer metrics, with lag in a 1 ms to 60 s histogram', async () => {
    const { registry, producerMetrics } = createMetrics();
    producerMetrics.enqueued('nightly-report', 0.0004);
    producerMetrics.enqueued('nightly-report', 2);
    producerMetrics.enqueued('hourly', -0.5);
    producerMetrics.skipped('nightly-report', 'overlap', 3);
    producerMetrics.skipped('nightly-report', 'paused', 1);
    producerMetrics.skipped('nightly-report', 'paused', 0);
    producerMetrics.fenced(2);
    producerMetrics.fenced(-1);
    const text = await registry.metrics();

    assert.deepEqual(samples(text, 'leasebeat_ticks_enqueued_total').sort(), [
      'leasebeat_ticks_enqueued_total{job="hourly"} 1',
      'leasebeat_ticks_enqueued_total{job="nightly-report"} 2',
    ]);
    assert.deepEqual(samples(text, 'leasebeat_ticks_skipped_total').sort(), [
      'leasebeat_ticks_skipped_total{job="nightly-report",reason="overlap"} 3',
      'leasebeat_ticks_skipped_total{job="nightly-report",reason="paused"} 1',
    ]);
    assert.deepEqual(samples(text, 'leasebeat_enqueue_fenced_total'), ['leasebeat_enqueue_fenced_total 2']);

    const buckets = samples(text, 'leasebeat_schedule_lag_seconds_bucket');
    assert.equal(buckets[0], 'leasebeat_schedule_lag_seconds_bucket{le="0.001"} 2', 'sub-millisecond and early enqueues');
    assert.ok(buckets.includes('leasebeat_schedule_lag_seconds_bucket{le="1"} 2'));
    assert.ok(buckets.includes('leasebeat_schedule_lag_seconds_bucket{le="2.5"} 3'));
    assert.ok(buckets.includes('leasebeat_schedule_lag_seconds_bucket{le="60"} 3'));
    assert.deepEqual(samples(text, 'leasebeat_schedule_lag_seconds_count'), ['leasebeat_schedule_lag_seconds_count 3']);
  });

  it("exports each run's start lag (start minus tick) at its first start, as the worker that starts it reports it", async () => {
    const { registry, workerMetrics } = createMetrics();
    const tick = Date.UTC(2026, 0, 1);
    // A staged run promoted at its tick and started 12 ms later; one that waited 3 s for a worker; a retry.
    workerMetrics.started('heartbeat', 'first', { tick, startedAt: tick + 12 });
    workerMetrics.started('heartbeat', 'first', { tick, startedAt: tick + 3_000 });
    workerMetrics.started('heartbeat', 'retry', { tick, startedAt: tick + 60_000 });
    const text = await registry.metrics();
    assert.deepEqual(samples(text, 'leasebeat_run_start_lag_seconds_count'), ['leasebeat_run_start_lag_seconds_count 2'], 'a retry starts when its backoff says: no lateness');
    assert.deepEqual(samples(text, 'leasebeat_run_start_lag_seconds_sum'), ['leasebeat_run_start_lag_seconds_sum 3.012']);
    const buckets = samples(text, 'leasebeat_run_start_lag_seconds_bucket');
    assert.ok(buckets.includes('leasebeat_run_start_lag_seconds_bucket{le="0.01"} 0') && buckets.includes('leasebeat_run_start_lag_seconds_bucket{le="0.025"} 1'));
    assert.ok(buckets.includes('leasebeat_run_start_lag_seconds_bucket{le="2.5"} 1') && buckets.includes('leasebeat_run_start_lag_seconds_bucket{le="5"} 2'));
    assert.deepEqual(samples(text, 'leasebeat_run_starts_total').sort(), [
      'leasebeat_run_starts_total{job="heartbeat",kind="first"} 2',
      'leasebeat_run_starts_total{job="heartbeat",kind="retry"} 1',
    ]);
  });

  it('declares every labelled counter at 0 once its labels are known, and keeps counts on a later declare', async () => {
    const { registry, declare, producerMetrics } = createMetrics();
    declare({ election: 'leasebeat', jobs: ['hourly'], queues: ['reports'] });
    let text = await registry.metrics();
    assert.deepEqual(samples(text, 'leader_election_master_status'), ['leader_election_master_status{name="leasebeat"} 0']);
    assert.deepEqual(samples(text, 'leader_election_slowpath_total'), ['leader_election_slowpath_total{name="leasebeat"} 0']);
    assert.deepEqual(samples(text, 'leasebeat_lease_renew_failures_total'), ['leasebeat_lease_renew_failures_total{name="leasebeat"} 0']);
    assert.deepEqual(samples(text, 'leasebeat_ticks_enqueued_total'), ['leasebeat_ticks_enqueued_total{job="hourly"} 0']);
    assert.deepEqual(
      samples(text, 'leasebeat_ticks_skipped_total').sort(),
      SKIP_REASONS.map((reason) => `leasebeat_ticks_skipped_total{job="hourly",reason="${reason}"} 0`).sort(),
    );
    assert.deepEqual(samples(text, 'leasebeat_queue_metrics_errors_total'), ['leasebeat_queue_metrics_errors_total{queue="reports"} 0']);
    assert.deepEqual(SKIP_REASONS.slice().sort(), ['catchup-limit', 'missed-window', 'no-handler', 'overlap', 'paused', 'removed', 'rescheduled']);

    producerMetrics.enqueued('hourly', 0.01);
    producerMetrics.skipped('hourly', 'overlap', 2);
    declare({ jobs: ['hourly'] });
    text = await registry.metrics();
    assert.deepEqual(samples(text, 'leasebeat_ticks_enqueued_total'), ['leasebeat_ticks_enqueued_total{job="hourly"} 1']);
    assert.ok(samples(text, 'leasebeat_ticks_skipped_total').includes('leasebeat_ticks_skipped_total{job="hourly",reason="overlap"} 2'));
  });

  it('uses its own registry, with the default process metrics, so two instances never clash', async () => {
    const first = createMetrics();
    const second = createMetrics();
    first.producerMetrics.fenced(1);
    assert.deepEqual(samples(await second.registry.metrics(), 'leasebeat_enqueue_fenced_total'), ['leasebeat_enqueue_fenced_total 0']);
    assert.match(await first.registry.metrics(), /^process_cpu_user_seconds_total \d/m);
    assert.match(await first.registry.metrics(), /^nodejs_heap_size_total_bytes \d/m);
  });
});

describe('mergeExpositions', () => {
  it('keeps one HELP and TYPE per family and keeps each family contiguous', () => {
    const queue = (name: string, waiting: number): string =>
      [
        '# HELP bullmq_job_count Number of jobs in the queue by state',
        '# TYPE bullmq_job_count gauge',
        `bullmq_job_count{queue="${name}", state="waiting"} ${waiting}`,
        '# HELP bullmq_job_failed_total Total number of failed jobs',
        '# TYPE bullmq_job_failed_total counter',
        `bullmq_job_failed_total{queue="${name}"} 0`,
      ].join('\n');
    assert.equal(
      mergeExpositions([queue('a', 1), '', queue('b', 2)]),
      [
        '# HELP bullmq_job_count Number of jobs in the queue by state',
        '# TYPE bullmq_job_count gauge',
        'bullmq_job_count{queue="a", state="waiting"} 1',
        'bullmq_job_count{queue="b", state="waiting"} 2',
        '# HELP bullmq_job_failed_total Total number of failed jobs',
        '# TYPE bullmq_job_failed_total counter',
        'bullmq_job_failed_total{queue="a"} 0',
        'bullmq_job_failed_total{queue="b"} 0',
        '',
      ].join('\n'),
    );
  });

  it('keeps histogram samples with the family announced above them', () => {
    const histogram = ['# TYPE lag histogram', 'lag_bucket{le="1"} 1', 'lag_sum 0.5', 'lag_count 1'].join('\n');
    assert.equal(mergeExpositions([histogram, histogram]), `${histogram}\nlag_bucket{le="1"} 1\nlag_sum 0.5\nlag_count 1\n`);
    assert.equal(mergeExpositions([]), '');
  });
});

describe('scrapeMetrics with real BullMQ queues', () => {
  let world: QueueWorld;
  before(async () => {
    world = await startQueueWorld();
  });
  after(async () => {
    await world.close();
  });

  it("appends BullMQ's job counts of every queue to the registry's metrics", async () => {
    const metrics = createMetrics();
    metrics.producerMetrics.enqueued('nightly-report', 0.01);
    const text = await scrapeMetrics(metrics, [world.reports, world.cleanup]);

    assert.match(text, /^leasebeat_ticks_enqueued_total\{job="nightly-report"\} 1$/m);
    assert.match(text, /^bullmq_job_count\{queue="reports", state="waiting"\} 2$/m);
    assert.match(text, /^bullmq_job_count\{queue="cleanup", state="delayed"\} 1$/m);
    assert.match(text, /^bullmq_job_completed_total\{queue="reports"\} 0$/m);
    assert.match(text, /^bullmq_job_failed_total\{queue="cleanup"\} 0$/m);
    assert.match(text, /^leasebeat_queue_metrics_errors_total\{queue="reports"\} 0$/m, 'declared at 0 by the scrape');
    assert.equal(text.match(/^# TYPE bullmq_job_count gauge$/gm)?.length, 1);
    assert.ok(text.endsWith('\n'));
  });

  it('leaves out, and counts, a queue whose Redis does not answer', async () => {
    const metrics = createMetrics();
    const stalled = await startRedis();
    const queue = new Queue('stalled', { connection: { host: '127.0.0.1', port: stalled.port }, prefix: 'leasebeat-test' });
    const admin = stalled.client();
    try {
      await queue.waitUntilReady();
      // The server holds every command for 2 s: a Redis that stopped answering, without killing it.
      await admin.call('CLIENT', 'PAUSE', '2000', 'ALL');
      const text = await scrapeMetrics(metrics, [world.reports, queue], { timeoutMs: 200 });
      assert.match(text, /^bullmq_job_count\{queue="reports", state="waiting"\} 2$/m);
      assert.doesNotMatch(text, /queue="stalled", state=/);
      assert.match(text, /^leasebeat_queue_metrics_errors_total\{queue="stalled"\} 1$/m);
    } finally {
      await queue.close();
      await admin.quit();
      await stalled.close();
    }
  });
});
