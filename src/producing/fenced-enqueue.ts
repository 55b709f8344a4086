import type { JobsOptions } from 'bullmq';
import type { ScheduledJob } from '../scheduling/define-job.js';
import { definitionHash } from '../scheduling/definition-hash.js';
import { Coalescer } from '../util/coalescer.js';
import { currentTrace, inSpan, SpanKind } from '../util/traces.js';
import { addRuns, type Run } from './enqueue.js';
import type { TickJobData } from '../ledger/job-data.js';
import type { QueueSet } from '../redis/queue-set.js';
import { UNCONFIRMED_WRITES, type WritePath } from '../redis/durability.js';
import type { ClaimOutcome, ClaimRequest, ConfirmOutcome, FencingToken, TickClaim, TickConfirmation, TickLedger } from '../ledger/tick-ledger.js';

/** How a claimed tick's run is added ({@link FencedEnqueue.add}). */
export interface AddOptions {
  manual?: boolean;
  dueAt?: number;
  stagedBy?: FencingToken;
  /** The id of the backfill that claimed it. */
  backfill?: string;
}

/** How long ledger entries and BullMQ deduplication keys outlive a tick, at the least. */
export const MIN_RETENTION_MS = 3_600_000;

/** How long the ledger remembers a job's ticks: longer than its catch-up window can look back. */
export function retentionMs(job: ScheduledJob): number {
  return Math.max(2 * job.catchup.windowMs, MIN_RETENTION_MS);
}

export interface FencedEnqueueOptions {
  ledger: TickLedger;
  queues: QueueSet;
  /** The term's fencing token: every claim is checked against the fence in the same script. */
  token: FencingToken;
  /** The local self-fence, checked again right before each batch of claims or adds is sent. */
  leading: () => boolean;
  /** The authoritative time (ms), recorded as `lastEnqueuedAt` by confirmations. */
  now: () => number;
  /**
   * How BullMQ adds are made durable before the ledger is told `enqueued` (replicated topologies: on
   * Cluster BullMQ's slot is usually on another shard than the ledger's). Default: no confirmation.
   */
  writes?: Pick<WritePath, 'write'>;
}

/**
 * The one fenced enqueue path, for scheduled ticks, manual triggers and the benchmark: claim the tick
 * in the fenced ledger, add its run to BullMQ under its deterministic job id, confirm it. Each step is
 * one call per tick for the caller, and shares its round trip with every other call made in the same
 * turn of the event loop: ticks due together are claimed by one script per {@link MAX_BATCH}, added
 * with one `addBulk` per queue, and confirmed by one script. Exactly-once does not depend on the
 * batching: each claim is decided alone, in order, under the fence, inside the script.
 */
export class FencedEnqueue {
  private readonly claims: Coalescer<TickClaim, ClaimOutcome | undefined>;
  /** Per run: added, not sent (not leading), or the error of its add. */
  private readonly adds: Coalescer<Run, boolean | Error>;
  private readonly confirms: Coalescer<TickConfirmation, ConfirmOutcome>;

  constructor(private readonly options: FencedEnqueueOptions) {
    const { ledger, token, leading, now } = options;
    this.claims = new Coalescer(async (claims) => (leading() ? ledger.claimTicks(token, claims) : claims.map(() => undefined)));
    this.adds = new Coalescer((runs) => this.send(runs));
    this.confirms = new Coalescer((confirmations) => ledger.confirmTicks(token, confirmations, now()));
  }

  /** Adds runs in one go, made durable: per run, added, not sent (not leading), or the error of its add. */
  private async send(runs: Run[]): Promise<Array<boolean | Error>> {
    const { queues, leading } = this.options;
    if (!leading()) return runs.map(() => false);
    const writes = this.options.writes ?? UNCONFIRMED_WRITES;
    // The runs of one batch share BullMQ's prefix, and so its slot: one confirmation covers them all.
    const added = await writes.write(queues.get(runs[0]!.job.queue).keys.id!, () => addRuns(queues, runs), (errors) =>
      errors.some((error) => error === undefined) ? `BullMQ adds of ${runs.length === 1 ? runs[0]!.opts.jobId : `${runs.length} runs`}` : undefined,
    );
    return added.map((error) => error ?? true);
  }

  get token(): FencingToken {
    return this.options.token;
  }

  /**
   * Claims a tick (see {@link TickLedger.claim}). Undefined when the self-fence said this instance no
   * longer leads when the batch was about to go: nothing was written.
   */
  claim(job: string, tick: number, jobId: string, request: ClaimRequest = {}): Promise<ClaimOutcome | undefined> {
    return inSpan('leasebeat.claim', () => ({ 'leasebeat.job': job, 'leasebeat.run_id': jobId }), async (span) => {
      const outcome = await this.claims.call({ job, tick, jobId, request });
      span.setAttribute('leasebeat.claim', outcome?.kind ?? 'not-leading');
      return outcome;
    });
  }

  /**
   * Adds the run of a claimed tick (`tick` is the nominal tick, or the request time of a manual run;
   * `backfill`: the id of the backfill that claimed it).
   * The job id makes a repeated add a no-op while the job exists; deduplication keeps it one after
   * removeOnComplete deleted the job, for as long as the ledger remembers the tick (for a run without
   * children only: BullMQ refuses deduplication on a flow parent, see addRun). A run whose `dueAt` is
   * ahead is added as a delayed job that BullMQ makes available at `dueAt` (staged). False when the
   * self-fence said this instance no longer leads right before the add was sent: nothing was added.
   */
  async add(job: ScheduledJob, tick: number, jobId: string, options: AddOptions = {}): Promise<boolean> {
    const run = this.run(job, tick, jobId, options);
    return inSpan('leasebeat.enqueue', () => ({ 'leasebeat.job': job.name, 'leasebeat.run_id': jobId, 'messaging.system': 'bullmq', 'messaging.destination.name': job.queue }), async () => {
      // The run continues this trace wherever it runs.
      const carrier = currentTrace();
      if (carrier) run.data.trace = carrier;
      const added = await this.adds.call(run);
      if (added instanceof Error) throw added;
      return added;
    }, { kind: SpanKind.PRODUCER });
  }

  /**
   * Adds the runs of claimed ticks of one job as {@link add} does, in one `addBulk` of their own (a
   * backfill's batch): not joined with the lanes' adds of the turn, so a live tick's add never waits
   * behind a few hundred backfill runs. Made durable as theirs are. Throws the error of the first run
   * that failed (the others may be in BullMQ: a repeated add of them adds nothing). False when the
   * self-fence said this instance no longer leads right before the adds were sent: nothing was added.
   */
  async addBatch(job: ScheduledJob, ticks: Array<{ tick: number; jobId: string }>, options: AddOptions = {}): Promise<boolean> {
    if (ticks.length === 0) return true;
    const runs = ticks.map(({ tick, jobId }) => this.run(job, tick, jobId, options));
    return inSpan('leasebeat.enqueue', () => ({ 'leasebeat.job': job.name, 'leasebeat.runs': runs.length, 'messaging.system': 'bullmq', 'messaging.destination.name': job.queue }), async () => {
      const carrier = currentTrace();
      if (carrier) for (const run of runs) run.data.trace = carrier;
      const added = await this.send(runs);
      const failed = added.find((result) => result instanceof Error);
      if (failed) throw failed;
      return added.every((result) => result === true);
    }, { kind: SpanKind.PRODUCER });
  }

  /** The run of a claimed tick, as BullMQ is to hold it (see {@link add}). */
  private run(job: ScheduledJob, tick: number, jobId: string, { manual = false, dueAt = 0, stagedBy, backfill }: AddOptions): Run {
    const data: TickJobData = { tick, token: this.options.token, data: job.data, manual, definition: definitionHash(job) };
    if (backfill !== undefined) data.backfill = backfill;
    // A runtime schedule's run names its job type, so that a worker that has not yet heard of the
    // schedule still knows which handler runs it.
    if (job.type !== undefined) data.type = job.type;
    const opts: JobsOptions = { ...job.jobOptions, jobId, deduplication: { id: jobId, ttl: retentionMs(job) } };
    const now = this.options.now();
    // BullMQ's delayed score is `timestamp + delay`: both from the authoritative (Redis-corrected) clock,
    // so the run becomes due at `dueAt` on Redis' time, whatever this process' clock says. The data says
    // it was staged: workers hold such a run until a live leader stands behind it (stagedRunMayStart.lua).
    if (dueAt > now) {
      Object.assign(opts, { timestamp: now, delay: dueAt - now });
      data.dueAt = dueAt;
    }
    // Another term's staged run, due or not: held by workers like one (see TickRunData.stagedBy).
    if (stagedBy) Object.assign(data, { dueAt, stagedBy });
    return { job, data, opts };
  }

  /** Records that the claimed tick's run is in BullMQ; see {@link TickLedger.confirmTicks} for the outcomes. */
  confirm(job: string, tick: number, jobId: string): Promise<ConfirmOutcome> {
    return this.confirms.call({ job, tick, jobId });
  }
}
