import { Heap } from 'heap-js';
import type { FlowJobNode, JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Term } from '../election/record.js';
import type { ScheduledJob, TickFlow, TickFlowChild } from '../scheduling/define-job.js';
import { decideOverlap, jitterMs, nextTicks, planCatchup, type RunState } from '../scheduling/plan.js';
import { systemClock, type Clock } from '../util/clock.js';
import { measureClockOffset } from './authoritative-clock.js';
import { tickJobId, type TickJobData } from './job-data.js';
import type { QueueSet } from './queue-set.js';
import type { FencingToken, TickLedger } from './tick-ledger.js';

/** Hooks for the producer's Prometheus metrics. */
export interface ProducerMetrics {
  enqueued(job: string, lagSeconds: number): void;
  skipped(job: string, reason: string, count: number): void;
  fenced(count: number): void;
}

export interface ProducerOptions {
  redis: Redis;
  ledger: TickLedger;
  queues: QueueSet;
  /** The jobs loaded right now; read again after every `reload()`. */
  jobs: () => ReadonlyMap<string, ScheduledJob>;
  /**
   * The local self-fence: false once RenewDeadline has passed since the last successful renewal. Checked
   * before every claim and every add, so a leader that was paused cannot enqueue before it notices.
   */
  stillLeading: () => boolean;
  logger: Logger;
  clock?: Clock;
  metrics?: ProducerMetrics;
}

interface Due {
  job: string;
  tick: number;
  fireAt: number;
}

/** How long ledger entries and BullMQ deduplication keys outlive a tick, at the least. */
const MIN_RETENTION_MS = 3_600_000;
/** How often the producer re-reads Redis time and prunes the ledger, and checks buffered runs. */
const CLOCK_RESYNC_MS = 60_000;
const BUFFER_POLL_MS = 1_000;
/** A tick whose enqueue failed is tried again this much later, until it is older than its catch-up window. */
const ENQUEUE_RETRY_MS = 1_000;
const RESTART_BACKOFF_MS = 500;
const MAX_RESTART_BACKOFF_MS = 10_000;

/** How long the ledger remembers a job's ticks: longer than its catch-up window can look back. */
export function retentionMs(job: ScheduledJob): number {
  return Math.max(2 * job.catchup.windowMs, MIN_RETENTION_MS);
}

/**
 * Enqueues every due tick of every job while this instance leads. One `run` is one leadership term: it
 * raises the fence to the term, finishes what a crashed leader left claimed, catches up missed ticks per
 * each job's policy, then fires ticks on time until its signal aborts. Each tick is claimed in the fenced
 * ledger before it is added to BullMQ with a deterministic job id, so it is enqueued at most once by any
 * number of leaders, and a claimed tick is always finished by the next one.
 */
export class Producer {
  private readonly clock: Clock;
  private readonly log: Logger;
  private offsetMs = 0;
  private wake: AbortController | undefined;
  private readonly lastFired = new Map<string, number>();
  private readonly buffered = new Map<string, number>();
  private readonly inflight = new Set<Promise<void>>();
  private retries: Due[] = [];

  constructor(private readonly options: ProducerOptions) {
    this.clock = options.clock ?? systemClock;
    this.log = options.logger.child({ component: 'producer' });
  }

  /** The authoritative time: the local clock corrected by the last Redis `TIME` sample. */
  now(): number {
    return this.clock.now() + this.offsetMs;
  }

  /** Picks up changed job definitions at once (hot reload). */
  reload(): void {
    this.wake?.abort();
  }

  /** Produces for one term until `signal` aborts, or until the fence shows a newer term. */
  async run(term: Term, signal: AbortSignal): Promise<void> {
    const token: FencingToken = { generation: term.generation, leaderTransitions: term.leaderTransitions };
    const term$ = new AbortController();
    const stop = (): void => term$.abort();
    signal.addEventListener('abort', stop, { once: true });
    const context: TermContext = { token, holder: term.holderIdentity, signal: term$.signal, log: this.log.child({ term: token }), stop };
    try {
      // Redis may be unreachable for a while (a restart, a failover): the term keeps trying to produce.
      for (let attempt = 0; !term$.signal.aborted; attempt++) {
        try {
          await this.produce(context);
          return;
        } catch (error) {
          if (term$.signal.aborted) return;
          const backoff = Math.min(RESTART_BACKOFF_MS * 2 ** attempt, MAX_RESTART_BACKOFF_MS);
          context.log.error({ err: error, retryInMs: backoff }, 'producer failed; restarting it');
          await this.clock.sleep(backoff, term$.signal).catch(() => undefined);
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      term$.abort();
      await Promise.allSettled([...this.inflight]);
      context.log.info('producer stopped');
    }
  }

  /** Raises the fence, takes over every job, then fires ticks until the term ends. */
  private async produce(context: TermContext): Promise<void> {
    await this.syncClock();
    if (!this.options.stillLeading() || context.signal.aborted) return;
    const raised = await this.options.ledger.raiseFence(context.token, context.holder, this.now());
    if (!raised.ok) {
      context.log.error({ fence: raised.fence }, 'the fence is already past this term; not producing');
      this.options.metrics?.fenced(1);
      return;
    }
    context.log.info('fence raised; producing');
    this.lastFired.clear();
    this.buffered.clear();
    this.retries = [];
    const heap = new Heap<Due>((a, b) => a.fireAt - b.fireAt || a.tick - b.tick);
    for (const job of this.options.jobs().values()) await this.takeOver(job, heap, context);
    await this.loop(heap, context);
  }

  private async loop(heap: Heap<Due>, context: TermContext): Promise<void> {
    let nextResync = this.clock.now() + CLOCK_RESYNC_MS;
    while (!context.signal.aborted) {
      const next = heap.peek();
      const untilDue = Math.min(next ? next.fireAt - this.now() : Infinity, ...this.retries.map((r) => r.fireAt - this.now()));
      const wait = Math.min(untilDue, this.buffered.size > 0 ? BUFFER_POLL_MS : Infinity, nextResync - this.clock.now());
      if (wait > 0) {
        this.wake = new AbortController();
        const woken = AbortSignal.any([context.signal, this.wake.signal]);
        await this.clock.sleep(wait, woken).catch(() => undefined);
        if (context.signal.aborted) return;
        if (this.wake.signal.aborted) {
          await this.rebuild(heap, context);
          continue;
        }
      }
      if (this.clock.now() >= nextResync) {
        await this.maintain().catch((error: unknown) => context.log.warn({ err: error }, 'clock sync or ledger pruning failed'));
        nextResync = this.clock.now() + CLOCK_RESYNC_MS;
      }
      if (this.buffered.size > 0) this.track(this.releaseBuffered(context));
      const now = this.now();
      const retries = this.retries.filter((r) => r.fireAt <= now);
      this.retries = this.retries.filter((r) => r.fireAt > now);
      for (const retry of retries) {
        const job = this.options.jobs().get(retry.job);
        if (job) this.fire(job, retry.tick, context, true);
      }
      while (heap.size() > 0 && heap.peek()!.fireAt <= now) {
        const due = heap.pop()!;
        const job = this.options.jobs().get(due.job);
        if (!job) continue;
        this.lastFired.set(job.name, due.tick);
        this.schedule(job, due.tick, heap);
        this.fire(job, due.tick, context, false);
      }
    }
  }

  /** Enqueues one tick in the background; a tick whose enqueue failed (Redis unreachable) is tried again. */
  private fire(job: ScheduledJob, tick: number, context: TermContext, late: boolean): void {
    this.track(
      this.enqueue(job, tick, context, { late }).catch((error: unknown) => {
        if (context.signal.aborted) return;
        context.log.warn({ err: error, job: job.name, tick: new Date(tick) }, 'enqueue failed; retrying');
        this.retries.push({ job: job.name, tick, fireAt: this.now() + ENQUEUE_RETRY_MS });
      }),
    );
  }

  /** Finishes ticks a previous term claimed but never added, records or runs missed ticks, and schedules the next. */
  private async takeOver(job: ScheduledJob, heap: Heap<Due>, context: TermContext): Promise<void> {
    const { ledger } = this.options;
    for (const tick of await ledger.pendingTicks(job.name)) {
      // A tick buffered behind an unfinished run stays buffered; any other pending claim is finished now.
      if (job.overlap === 'bufferOne' && !this.buffered.has(job.name) && (await this.unfinished(job))) {
        this.buffered.set(job.name, tick);
        continue;
      }
      context.log.info({ job: job.name, tick: new Date(tick) }, 'finishing a tick claimed by an earlier term');
      await this.enqueue(job, tick, context, { skipOverlap: true });
    }
    const now = this.now();
    // A job no term has ticked yet owes its ticks from the moment a leader first saw it, so a failover
    // before its first tick cannot lose that tick.
    const owedSince = await ledger.markScheduledSince(job.name, now);
    const state = await ledger.jobState(job.name);
    const plan = planCatchup(job, state.lastScheduledTick ?? owedSince, now);
    for (const range of plan.skipped) {
      if (!(await ledger.skipRange(context.token, job.name, range))) return this.fenced(context);
      this.options.metrics?.skipped(job.name, range.reason, range.count);
      context.log.warn({ job: job.name, ...range, from: new Date(range.from), to: new Date(range.to) }, 'skipped missed ticks');
    }
    for (const tick of plan.enqueue) await this.enqueue(job, tick, context);
    const after = Math.max(now, state.lastScheduledTick ?? -Infinity);
    this.lastFired.set(job.name, after);
    this.schedule(job, after, heap);
  }

  /** Rebuilds the timer heap after the job definitions changed. */
  private async rebuild(heap: Heap<Due>, context: TermContext): Promise<void> {
    heap.clear();
    const jobs = this.options.jobs();
    for (const name of [...this.lastFired.keys()]) if (!jobs.has(name)) this.lastFired.delete(name);
    for (const job of jobs.values()) {
      const last = this.lastFired.get(job.name);
      if (last === undefined) await this.takeOver(job, heap, context);
      else this.schedule(job, last, heap);
    }
    context.log.info({ jobs: jobs.size }, 'schedules reloaded');
  }

  private schedule(job: ScheduledJob, after: number, heap: Heap<Due>): void {
    const [tick] = nextTicks(job, after, 1);
    if (tick === undefined) return;
    heap.push({ job: job.name, tick, fireAt: tick + jitterMs(job, tick) });
  }

  /** Decides the fate of one tick and, if it runs, adds it to BullMQ. */
  private async enqueue(job: ScheduledJob, tick: number, context: TermContext, options: { skipOverlap?: boolean; late?: boolean } = {}): Promise<void> {
    const { ledger, metrics } = this.options;
    if (context.signal.aborted) return;
    if (!this.options.stillLeading()) return this.selfFenced(context);
    const jobId = tickJobId(job.name, tick);
    let skipReason: string | undefined;
    if (job.paused) skipReason = 'paused';
    else if (options.late && this.now() - tick > job.catchup.windowMs) skipReason = 'missed-window';
    else if (job.overlap !== 'allow' && !options.skipOverlap) {
      const decision = decideOverlap(job.overlap, await this.previousRun(job), this.buffered.has(job.name));
      if (decision === 'buffer') {
        // Claimed now, added later: a claim is pending in the ledger, so the tick survives the end of this term.
        const outcome = await ledger.claim(context.token, job.name, tick, jobId);
        if (outcome.kind === 'fenced') return this.fenced(context);
        if (outcome.kind === 'claimed') this.buffered.set(job.name, tick);
        return;
      }
      if (decision === 'skip') skipReason = 'overlap';
    }
    const outcome = await ledger.claim(context.token, job.name, tick, jobId, skipReason);
    switch (outcome.kind) {
      case 'fenced':
        return this.fenced(context);
      case 'settled':
        return;
      case 'skipped':
        metrics?.skipped(job.name, outcome.reason, 1);
        context.log.info({ job: job.name, tick: new Date(tick), reason: outcome.reason }, 'tick skipped');
        return;
      case 'claimed':
        break;
    }
    // The last moment to notice a lost term before the (unfenced) BullMQ add. An abandoned claim stays
    // pending in the ledger and is finished by the next term.
    if (context.signal.aborted) return;
    if (!this.options.stillLeading()) return this.selfFenced(context);
    await this.add(job, tick, jobId, context.token);
    const now = this.now();
    await ledger.confirm(job.name, tick, jobId, now);
    metrics?.enqueued(job.name, Math.max(0, now - tick) / 1000);
  }

  private async add(job: ScheduledJob, tick: number, jobId: string, token: FencingToken): Promise<void> {
    const data: TickJobData = { tick, token, data: job.data, manual: false };
    // The job id makes a repeated add a no-op while the job exists; deduplication keeps it one after
    // removeOnComplete deleted the job, for as long as the ledger remembers the tick.
    const opts: JobsOptions = { ...job.jobOptions, jobId, deduplication: { id: jobId, ttl: retentionMs(job) } };
    if (!job.flow) {
      await this.options.queues.get(job.queue).add(job.name, data, opts);
      return;
    }
    const flow: TickFlow = await job.flow({ tick: new Date(tick), data: job.data });
    await this.options.queues.flows().add({
      ...flow,
      name: job.name,
      queueName: job.queue,
      data: { ...data, flow: flow.data as unknown },
      opts: { ...flow.opts, ...opts },
      children: flow.children?.map((child) => withQueue(child, job.queue)),
    });
  }

  private async previousRun(job: ScheduledJob): Promise<RunState> {
    const { lastJobId } = await this.options.ledger.jobState(job.name);
    if (!lastJobId) return 'none';
    const state = await this.options.queues.get(job.queue).getJobState(lastJobId);
    switch (state) {
      case 'active':
        return 'active';
      case 'delayed':
        return 'delayed';
      case 'waiting':
      case 'waiting-children':
      case 'prioritized':
        return 'waiting';
      default:
        return 'finished';
    }
  }

  private async unfinished(job: ScheduledJob): Promise<boolean> {
    const previous = await this.previousRun(job);
    return previous !== 'finished' && previous !== 'none';
  }

  /** Adds each buffered tick once the run before it has finished. */
  private async releaseBuffered(context: TermContext): Promise<void> {
    for (const [name, tick] of [...this.buffered]) {
      const job = this.options.jobs().get(name);
      if (!job) {
        this.buffered.delete(name);
        continue;
      }
      if (await this.unfinished(job)) continue;
      this.buffered.delete(name);
      await this.enqueue(job, tick, context, { skipOverlap: true });
    }
  }

  private async maintain(): Promise<void> {
    await this.syncClock();
    for (const job of this.options.jobs().values()) {
      await this.options.ledger.prune(job.name, this.now() - retentionMs(job));
    }
  }

  private async syncClock(): Promise<void> {
    const sync = await measureClockOffset(this.options.redis, this.clock);
    this.offsetMs = sync.offsetMs;
    this.log.debug(sync, 'synchronised with Redis TIME');
  }

  private fenced(context: TermContext): void {
    this.options.metrics?.fenced(1);
    context.log.error('enqueue rejected by the fence: a newer term exists; stopping the producer');
    context.stop();
  }

  private selfFenced(context: TermContext): void {
    context.log.warn('renew deadline passed without a renewal; stopping the producer before the lease can expire');
    context.stop();
  }

  private track(work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => this.log.error({ err: error }, 'enqueue failed')).finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }
}

interface TermContext {
  token: FencingToken;
  holder: string;
  signal: AbortSignal;
  log: Logger;
  stop: () => void;
}

/** Gives every node of a tick's flow a queue: its own, or the job's. */
function withQueue(child: TickFlowChild, queue: string): FlowJobNode {
  return { ...child, queueName: child.queueName ?? queue, children: child.children?.map((c) => withQueue(c, queue)) };
}
