import { createHash } from 'node:crypto';
import { configure } from 'safe-stable-stringify';
import type { ScheduledJob } from './define-job.js';

/** Sorted keys, so that the same content in another key order hashes the same. */
const canonical = configure({ deterministic: true, circularValue: '[Circular]', bigint: true });

/** What says where or when a definition was read (its file, its version's write), not what it is. */
const NOT_CONTENT = new Set<string>(['file', 'owedAfter', 'definedAt', 'revision']);

const hashes = new WeakMap<ScheduledJob, string>();

/**
 * The content hash of a definition as the producer runs it: every field it compiled to (schedule, time
 * zone, data, options, policies) and its handler's and flow builder's source text, so that an edit of any
 * of them, in a file or a runtime schedule's spec, gives a new hash, and the same definition on every
 * instance gives the same one. Modules a handler imports are not in it. Stamped on every run
 * (TickRunData.definition); computed once per compiled definition.
 */
export function definitionHash(job: ScheduledJob): string {
  let hash = hashes.get(job);
  if (hash === undefined) {
    const content: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(job)) if (!NOT_CONTENT.has(key)) content[key] = value;
    const text = canonical(content, (_key, value: unknown) => (typeof value === 'function' ? `function:${String(value)}` : value));
    hash = `sha256:${createHash('sha256').update(text ?? '').digest('hex').slice(0, 16)}`;
    hashes.set(job, hash);
  }
  return hash;
}
