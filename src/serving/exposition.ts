import type { Queue } from 'bullmq';
import { withTimeout } from '../util/abort.js';
import { systemClock } from '../util/clock.js';
import type { LeasebeatMetrics } from './metrics.js';

/** Bound of one queue's BullMQ export, so a scrape still answers while Redis hangs. */
export const DEFAULT_QUEUE_METRICS_TIMEOUT_MS = 5_000;

interface Family {
  help?: string;
  type?: string;
  samples: string[];
}

const META_LINE = /^#\s+(HELP|TYPE)\s+(\S+)/;
const SAMPLE_NAME = /^[^\s{]+/;

/**
 * Joins Prometheus text expositions so that every metric family appears once, with a single HELP and TYPE
 * line. BullMQ exports each queue on its own, HELP and TYPE included, and concatenating those verbatim
 * splits families, which strict parsers reject.
 */
export function mergeExpositions(texts: readonly string[]): string {
  const families = new Map<string, Family>();
  const familyOf = (name: string): Family => {
    let family = families.get(name);
    if (!family) families.set(name, (family = { samples: [] }));
    return family;
  };
  for (const text of texts) {
    let current: string | undefined;
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const meta = META_LINE.exec(line);
      if (meta) {
        const [, kind, name] = meta as unknown as [string, 'HELP' | 'TYPE', string];
        current = name;
        const family = familyOf(name);
        if (kind === 'HELP') family.help ??= line;
        else family.type ??= line;
        continue;
      }
      if (line.startsWith('#')) continue;
      const name = SAMPLE_NAME.exec(line)?.[0] ?? line;
      // Histogram and summary samples (`_bucket`, `_sum`, `_count`) belong to the family announced above them.
      familyOf(current !== undefined && name.startsWith(current) ? current : name).samples.push(line);
    }
  }
  const lines: string[] = [];
  for (const family of families.values()) {
    if (family.help) lines.push(family.help);
    if (family.type) lines.push(family.type);
    lines.push(...family.samples);
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/**
 * The body of `/metrics`: the registry's metrics followed by BullMQ's own queue metrics
 * (`bullmq_job_count{queue,state}`, `bullmq_job_completed_total`, `bullmq_job_failed_total`). A queue
 * whose export fails or times out is left out of this scrape and counted in
 * `leasebeat_queue_metrics_errors_total`.
 */
export async function scrapeMetrics(
  metrics: LeasebeatMetrics,
  queues: readonly Queue[],
  options: { timeoutMs?: number; onQueueError?: (queue: string, error: unknown) => void } = {},
): Promise<string> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_QUEUE_METRICS_TIMEOUT_MS;
  metrics.declare({ queues: queues.map((queue) => queue.name) });
  const queueTexts = await Promise.all(
    queues.map(async (queue) => {
      try {
        return await withTimeout(systemClock, timeoutMs, undefined, `metrics of queue ${queue.name}`, () =>
          queue.exportPrometheusMetrics(),
        );
      } catch (error) {
        metrics.instruments.queueMetricsErrors.inc({ queue: queue.name });
        options.onQueueError?.(queue.name, error);
        return '';
      }
    }),
  );
  // Read the registry last, so this scrape already counts its own queue errors.
  return (await metrics.registry.metrics()) + mergeExpositions(queueTexts);
}
