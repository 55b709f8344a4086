import type { Clock } from '../util/clock.js';
import type { MemberRecord } from './record.js';
import type { MemberStore } from './store.js';

/** How `waitForDrain` ended. */
export type DrainOutcome =
  /** The member reports it is cordoned, has stopped taking jobs and has none active. */
  | { kind: 'drained'; record: MemberRecord }
  /** The member's record is gone: it shut down or was removed. */
  | { kind: 'left' }
  /** The timeout passed first; the last record seen, if any. */
  | { kind: 'timeout'; record: MemberRecord | undefined };

/**
 * Waits until a cordoned member has finished its active jobs. Only a record written after the call began
 * counts (a higher sequence number than the one seen first), so an old record cannot answer for the member.
 */
export async function waitForDrain(
  store: MemberStore,
  identity: string,
  options: { timeoutMs: number; pollMs: number; clock: Clock; onProgress?(record: MemberRecord): void },
): Promise<DrainOutcome> {
  const { clock } = options;
  const deadline = clock.now() + options.timeoutMs;
  const first = await store.get(identity);
  if (!first) return { kind: 'left' };
  let last = first;
  for (;;) {
    const record = await store.get(identity);
    if (!record) return { kind: 'left' };
    if (record.seq !== last.seq) options.onProgress?.(record);
    last = record;
    if (record.seq > first.seq && record.cordoned && !record.draining && record.activeJobs === 0) return { kind: 'drained', record };
    if (clock.now() >= deadline) return { kind: 'timeout', record };
    await clock.sleep(Math.min(options.pollMs, Math.max(0, deadline - clock.now())));
  }
}
