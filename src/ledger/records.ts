/**
 * The ledger protocol, typed once: the records leasebeat stores for each tick (the tick ledger, a hash of
 * nominal tick → record per job) and for each trigger request (a hash of request id → record per job).
 * The Lua scripts write most of them (their headers give the same formats); TypeScript reads them only
 * through {@link parseLedgerRecord} and {@link parseTriggerRecord}, and writes through the formatters.
 *
 * Tick records:
 * - `claimed|<generation>|<transitions>|<jobId>`: claimed by that term, to be added to BullMQ now;
 * - `buffered|<generation>|<transitions>|<jobId>`: claimed, to be added once the previous run finished;
 * - `enqueued|<jobId>`: its run is in BullMQ;
 * - `skipped|<reason>`: it will never run;
 * - `unstaging|<reason>|<jobId>|<queue>`: its staged run is being taken back (the queue goes last: it is
 *   the only part that may hold a '|').
 *
 * Trigger records: `claimed|<generation>|<transitions>|<jobId>`, `enqueued|<jobId>`, `refused|<reason>`.
 *
 * A record of no known form means two versions of leasebeat (or a script and its caller) disagree: it is a
 * {@link LedgerRecordError}, never read as the nearest known kind.
 */

/** The fencing token of a leadership term: the lease generation (uid) and its `leaderTransitions`. */
export interface FencingToken {
  generation: string;
  leaderTransitions: number;
}

/**
 * Why a staged run was taken back: before its due time, a pause, a removal or a new schedule; after it
 * (a run no worker started before a new leader took its job over), a pause or the catch-up policy.
 */
export const UNSTAGE_REASONS = ['paused', 'removed', 'rescheduled', 'missed-window', 'catchup-limit'] as const;
export type UnstageReason = (typeof UNSTAGE_REASONS)[number];

/** The recorded fate of one tick (see the module's comment for the stored forms). */
export type LedgerRecord =
  /** Claimed by `term`, to be added now (or again: the claiming term may have added it before it ended). */
  | { kind: 'claimed'; term: FencingToken; jobId: string }
  /** Claimed by `term` as buffered (overlap `bufferOne`): to be added once the previous run has finished. */
  | { kind: 'buffered'; term: FencingToken; jobId: string }
  /** Its run is in BullMQ. */
  | { kind: 'enqueued'; jobId: string }
  /** It will never run, for `reason`. */
  | { kind: 'skipped'; reason: string }
  /** Its staged run (in `queue`) is being taken back for `reason`; the take-back is not settled yet. */
  | { kind: 'unstaging'; reason: UnstageReason; jobId: string; queue: string };

/** The recorded fate of one trigger request (`leasebeat trigger`). */
export type TriggerRecord =
  /** Claimed by `term`: its run is to be added (or was, and the add is not confirmed yet). */
  | { kind: 'claimed'; term: FencingToken; jobId: string }
  /** Its run is in BullMQ. */
  | { kind: 'enqueued'; jobId: string }
  /** It never ran and never will, for `reason`. */
  | { kind: 'refused'; reason: string };

/** Which ledger a record belongs to: a tick's or a trigger request's. */
export type RecordLedger = 'tick' | 'trigger';

/** A stored record of no form this version of leasebeat knows (or one it was asked to write that cannot be read back). */
export class LedgerRecordError extends Error {
  override readonly name = 'LedgerRecordError';
  constructor(
    readonly ledger: RecordLedger,
    /** The record as stored (or as it would have been written). */
    readonly record: string,
    readonly problem: string,
  ) {
    super(`${ledger} record ${JSON.stringify(record)} ${problem}: this version of leasebeat does not know it`);
  }
}

/** A take-back that some term marked and did not settle, as its ledger record says. */
export interface TakeBackInProgress {
  reason: UnstageReason;
  jobId: string;
  queue: string;
}

/** Reads a tick's record as stored; throws {@link LedgerRecordError} for a record of no known form. */
export function parseLedgerRecord(text: string): LedgerRecord {
  const [kind, rest] = splitKind(text);
  switch (kind) {
    case 'claimed':
    case 'buffered':
      return { kind, ...claimOf('tick', text, rest) };
    case 'enqueued':
      return { kind, jobId: jobIdOf('tick', text, rest) };
    case 'skipped':
      return { kind, reason: rest };
    case 'unstaging': {
      const match = /^([^|]*)\|([^|]+)\|(.+)$/s.exec(rest);
      if (!match) throw new LedgerRecordError('tick', text, 'is not unstaging|<reason>|<jobId>|<queue>');
      const reason = match[1]!;
      if (!isUnstageReason(reason)) throw new LedgerRecordError('tick', text, `names no take-back reason (${UNSTAGE_REASONS.join(', ')})`);
      return { kind, reason, jobId: match[2]!, queue: match[3]! };
    }
    default:
      throw new LedgerRecordError('tick', text, 'is of no known kind (claimed, buffered, enqueued, skipped, unstaging)');
  }
}

/** A tick's record as stored; throws {@link LedgerRecordError} for one that would not read back as itself. */
export function formatLedgerRecord(record: LedgerRecord): string {
  let text: string;
  switch (record.kind) {
    case 'claimed':
    case 'buffered':
      text = `${record.kind}|${record.term.generation}|${record.term.leaderTransitions}|${record.jobId}`;
      break;
    case 'enqueued':
      text = `enqueued|${record.jobId}`;
      break;
    case 'skipped':
      text = `skipped|${record.reason}`;
      break;
    case 'unstaging':
      text = `unstaging|${record.reason}|${record.jobId}|${record.queue}`;
      break;
  }
  return readsBack('tick', text, record, parseLedgerRecord);
}

/** Reads a trigger request's record as stored; throws {@link LedgerRecordError} for a record of no known form. */
export function parseTriggerRecord(text: string): TriggerRecord {
  const [kind, rest] = splitKind(text);
  switch (kind) {
    case 'claimed':
      return { kind, ...claimOf('trigger', text, rest) };
    case 'enqueued':
      return { kind, jobId: jobIdOf('trigger', text, rest) };
    case 'refused':
      return { kind, reason: rest };
    default:
      throw new LedgerRecordError('trigger', text, 'is of no known kind (claimed, enqueued, refused)');
  }
}

/** A trigger request's record as stored; throws {@link LedgerRecordError} for one that would not read back as itself. */
export function formatTriggerRecord(record: TriggerRecord): string {
  let text: string;
  switch (record.kind) {
    case 'claimed':
      text = `claimed|${record.term.generation}|${record.term.leaderTransitions}|${record.jobId}`;
      break;
    case 'enqueued':
      text = `enqueued|${record.jobId}`;
      break;
    case 'refused':
      text = `refused|${record.reason}`;
      break;
  }
  return readsBack('trigger', text, record, parseTriggerRecord);
}

/** The term that claimed the tick to add it now (a `claimed` record), or undefined for any other record. */
export function claimingTerm(record: LedgerRecord): FencingToken | undefined {
  return record.kind === 'claimed' ? record.term : undefined;
}

/** The take-back an `unstaging` record says is under way, or undefined for any other record. */
export function takeBackInProgress(record: LedgerRecord): TakeBackInProgress | undefined {
  return record.kind === 'unstaging' ? { reason: record.reason, jobId: record.jobId, queue: record.queue } : undefined;
}

/** The run (BullMQ job id) a record names, or undefined for a skipped tick or a refused request. */
export function recordedRun(record: LedgerRecord | TriggerRecord): string | undefined {
  return record.kind === 'skipped' || record.kind === 'refused' ? undefined : record.jobId;
}

function isUnstageReason(reason: string): reason is UnstageReason {
  return (UNSTAGE_REASONS as readonly string[]).includes(reason);
}

/** `kind|rest` as its two parts; a text with no '|' has no kind. */
function splitKind(text: string): [string | undefined, string] {
  const bar = text.indexOf('|');
  return bar < 0 ? [undefined, ''] : [text.slice(0, bar), text.slice(bar + 1)];
}

/** `<generation>|<transitions>|<jobId>` (the job id last). */
function claimOf(ledger: RecordLedger, text: string, rest: string): { term: FencingToken; jobId: string } {
  const match = /^([^|]*)\|(-?\d+)\|(.+)$/s.exec(rest);
  const transitions = match ? Number(match[2]) : Number.NaN;
  if (!match || !Number.isSafeInteger(transitions)) {
    throw new LedgerRecordError(ledger, text, 'is not <kind>|<generation>|<transitions>|<jobId>');
  }
  return { term: { generation: match[1]!, leaderTransitions: transitions }, jobId: match[3]! };
}

function jobIdOf(ledger: RecordLedger, text: string, rest: string): string {
  if (rest === '') throw new LedgerRecordError(ledger, text, 'names no job id');
  return rest;
}

/** `text`, once it is checked to read back as `record` (a '|' in the wrong field would not). */
function readsBack<R extends object>(ledger: RecordLedger, text: string, record: R, parse: (text: string) => R): string {
  let back: R;
  try {
    back = parse(text);
  } catch (error) {
    if (error instanceof LedgerRecordError) throw new LedgerRecordError(ledger, text, `(to be written) cannot be read back: ${error.problem}`);
    throw error;
  }
  if (!sameRecord(back, record)) throw new LedgerRecordError(ledger, text, `(to be written) would read back as ${JSON.stringify(back)}`);
  return text;
}

function sameRecord(a: object, b: object): boolean {
  const left = Object.entries(a);
  const right = new Map(Object.entries(b));
  if (left.length !== right.size) return false;
  return left.every(([key, value]) => {
    const other: unknown = right.get(key);
    if (typeof value === 'object' && value !== null) return typeof other === 'object' && other !== null && sameRecord(value as object, other);
    return Object.is(value, other);
  });
}
