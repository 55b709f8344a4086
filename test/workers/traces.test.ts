import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { Producer } from '../../src/producing/producer.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
import { currentTrace } from '../../src/util/traces.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJob } from '../support/scheduled-job.js';
import { term } from '../support/term.js';
import { until } from '../support/until.js';
import { testWorkerPool } from '../support/worker-pool.js';

const logger = pino({ level: 'silent' });

describe('OpenTelemetry spans of a tick, from its claim to its run (real Redis and BullMQ)', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);

  it('without an SDK nothing is traced, and a run carries no trace context', () => {
    assert.equal(currentTrace(), undefined);
  });

  it('tick, claim and enqueue spans on the leader; the run span in the worker continues the trace through the run\'s data', { timeout: 30_000 }, async () => {
    // What an application's SDK registers (NodeSDK does the same): a tracer provider, context, W3C propagation.
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const jobs = new Map([['traced', scheduledJob({ name: 'traced', every: '1s', handler: () => 'ran' })]]);
    const pool = testWorkerPool({ connection: redis.client, logger });
    pool.update(jobs);
    const stop = new AbortController();
    const producing = new Producer({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, stageAheadMs: 0 }).run(term(1), stop.signal);
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const named = (name: string, runId: string): ReadableSpan | undefined => exporter.getFinishedSpans().find((span) => span.name === name && span.attributes['leasebeat.run_id'] === runId);
      const run = await until('a run span', () => exporter.getFinishedSpans().find((span) => span.name === 'leasebeat.run'), 15_000);
      const runId = String(run.attributes['leasebeat.run_id']);
      const enqueue = await until('its enqueue span', () => named('leasebeat.enqueue', runId), 5_000);
      const claim = named('leasebeat.claim', runId)!;
      const tick = exporter.getFinishedSpans().find((span) => span.name === 'leasebeat.tick' && span.spanContext().spanId === enqueue.parentSpanContext?.spanId);
      assert.ok(tick, 'the enqueue is a child of its tick');
      assert.equal(tick.attributes['leasebeat.job'], 'traced');
      assert.equal(tick.attributes['leasebeat.term'], 'gen-1/1');
      assert.equal(claim.parentSpanContext?.spanId, tick.spanContext().spanId, 'so is the claim');
      assert.equal(claim.attributes['leasebeat.claim'], 'claimed');
      assert.equal(run.parentSpanContext?.spanId, enqueue.spanContext().spanId, 'the run continues from its enqueue');
      for (const span of [claim, enqueue, run]) assert.equal(span.spanContext().traceId, tick.spanContext().traceId, `${span.name} is in the tick's trace`);
      // The link is the run's data, as a worker in another process reads it.
      const stored = await queue.getJob(runId);
      assert.match((stored?.data as TickJobData).trace?.traceparent ?? '', new RegExp(`^00-${tick.spanContext().traceId}-${enqueue.spanContext().spanId}-01$`));
    } finally {
      stop.abort();
      await producing;
      await pool.close(1_000);
      await queue.close();
      trace.disable();
      context.disable();
      propagation.disable();
      await provider.shutdown();
    }
  });
});
