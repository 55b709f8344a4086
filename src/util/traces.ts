import { context, INVALID_SPAN_CONTEXT, propagation, ProxyTracerProvider, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';

/**
 * OpenTelemetry spans of a tick's way, through `@opentelemetry/api` alone: a no-op unless the application
 * registers an SDK (a tracer provider, and a propagator for the spans to link across processes). The
 * producer's spans (`leasebeat.tick`, with `leasebeat.claim` and `leasebeat.enqueue` under it) and the
 * worker's (`leasebeat.run`) are linked through the run's data, which carries the W3C trace context of
 * its enqueue: a run started in another process continues the same trace.
 */
const tracer = trace.getTracer('leasebeat');
/** What the work of a span gets when nothing traces. */
const NOT_TRACED = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * Whether an SDK registered a tracer provider. Until one does, spans are skipped outright: even the API's
 * no-op spans cost an async frame, closures and attribute objects per tick, which a burst of 100,000 ticks
 * turns into old-space garbage.
 */
function tracing(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer('leasebeat') !== undefined;
}

/** A span's W3C trace context (`traceparent`, `tracestate`), as a run's data carries it. */
export type TraceCarrier = Record<string, string>;

/** The active span's trace context, for the run's data; undefined when nothing traces (no propagator, no span). */
export function currentTrace(): TraceCarrier | undefined {
  if (!tracing()) return undefined;
  const carrier: TraceCarrier = {};
  propagation.inject(context.active(), carrier);
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}

/** The context a run's data carries (its enqueue's), or none. */
export function traceOf(carrier: TraceCarrier | undefined): Context {
  return carrier ? propagation.extract(ROOT_CONTEXT, carrier) : ROOT_CONTEXT;
}

/**
 * Runs `work` inside a new span named `name` (the active one's child, or `parent`'s), ending it when the
 * work settles: an error is recorded on the span, which is marked failed, and thrown on.
 */
export function inSpan<T>(name: string, attributes: Attributes | (() => Attributes), work: (span: Span) => Promise<T>, options: { kind?: SpanKind; parent?: Context } = {}): Promise<T> {
  if (!tracing()) return work(NOT_TRACED);
  const kind = options.kind ?? SpanKind.INTERNAL;
  return tracer.startActiveSpan(name, { kind, attributes: typeof attributes === 'function' ? attributes() : attributes }, options.parent ?? context.active(), async (span) => {
    try {
      return await work(span);
    } catch (error) {
      const failure = error instanceof Error ? error : new Error(String(error));
      span.recordException(failure);
      span.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
      throw error;
    } finally {
      span.end();
    }
  });
}

export { SpanKind };
