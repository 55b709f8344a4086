import type { Logger } from 'pino';
import { raceAbort } from '../util/abort.js';
import type { Clock } from '../util/clock.js';
import { MemberHealth, type DisruptionState, type MemberCondition, type MemberEvent } from './health.js';
import type { MemberSettings } from './settings.js';
import type { MemberStore } from './store.js';

/** Hooks for `leasebeat_members{condition}` and `leasebeat_disruption_state`, set by the leader only. */
export interface MemberMetrics {
  observed(counts: Record<MemberCondition, number>, disruption: DisruptionState): void;
  /** Leadership ended: this instance no longer judges, so it exports no member figures. */
  cleared(): void;
}

export interface MemberMonitorOptions {
  store: MemberStore;
  /** The leader's identity. */
  self: string;
  settings: MemberSettings;
  clock: Clock;
  logger: Logger;
  metrics?: MemberMetrics;
  /** Sees every event, after it is logged. */
  onEvent?(event: MemberEvent): void;
}

/**
 * The leader's member lifecycle loop, one per leadership term: every heartbeat interval it reads the
 * records, judges them (`MemberHealth`), removes members Unknown for too long at the permitted rate,
 * publishes the judgement for the status API, and logs each transition as an event. A new term builds a
 * new monitor, so state is always rebuilt from Redis (the records and their Redis-stamped write times).
 */
export class MemberMonitor {
  private readonly health: MemberHealth;
  private readonly log: Logger;
  /** Set when `run` ends: a pass finishing later must not export figures this instance no longer owns. */
  private stopped = false;

  constructor(private readonly options: MemberMonitorOptions) {
    this.health = new MemberHealth(options.settings, options.self, options.clock.now());
    this.log = options.logger;
  }

  /** One pass: read, judge, remove, publish. Returns the events of the pass. */
  async pass(): Promise<MemberEvent[]> {
    const { store, clock, settings } = this.options;
    const observed = await store.list();
    // Observation time is when the read came back: the latest moment we know the records were so.
    const events = this.health.observe(clock.now(), observed);
    for (const identity of this.health.dueRemovals(clock.now())) {
      const record = observed.get(identity);
      if (!record || !(await store.remove(identity, record.raw))) continue;
      events.push(...this.health.removed(identity, clock.now()));
    }
    // Kept for a few passes, so a leader that dies leaves no judgement behind for long.
    await store.publishHealth(this.health.view(clock.now()), Math.max(settings.graceMs, 3 * settings.heartbeatIntervalMs));
    if (!this.stopped) this.options.metrics?.observed(this.health.counts(), this.health.disruption);
    for (const event of events) this.report(event);
    return events;
  }

  /** Passes every heartbeat interval until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, settings } = this.options;
    this.log.info({ gracePeriodMs: settings.graceMs, removalTimeoutMs: settings.removalTimeoutMs }, 'member health monitor started');
    try {
      while (!signal.aborted) {
        try {
          // Leadership may end mid-pass (Redis hung, say): stop waiting at once, so the lease is released
          // without delay. A pass that completes late only publishes or removes what a new leader redoes.
          await raceAbort(this.pass(), signal);
        } catch (error) {
          if (signal.aborted) return;
          this.log.warn({ err: error }, 'member health pass failed');
        }
        try {
          await clock.sleep(settings.heartbeatIntervalMs, signal);
        } catch {
          return;
        }
      }
    } finally {
      this.stopped = true;
      this.options.metrics?.cleared();
      this.log.info('member health monitor stopped');
    }
  }

  private report(event: MemberEvent): void {
    switch (event.reason) {
      case 'MemberJoined':
        this.log.info({ event: event.reason, member: event.identity, condition: event.condition }, `member ${event.identity} joined`);
        break;
      case 'ConditionChanged': {
        const fields = { event: event.reason, member: event.identity, from: event.from, to: event.to, activeJobIds: event.activeJobIds };
        const message =
          event.to === 'Unknown'
            ? `member ${event.identity} is Unknown: its heartbeat has not changed for ${this.options.settings.graceMs} ms` +
              (event.activeJobIds.length ? `; BullMQ recovers its ${event.activeJobIds.length} active job(s) once their locks expire` : '')
            : `member ${event.identity}: ${event.from} → ${event.to}${event.detail ? ` (${event.detail})` : ''}`;
        if (event.to === 'Ready') this.log.info(fields, message);
        else this.log.warn(fields, message);
        break;
      }
      case 'MemberLeft':
        this.log.info({ event: event.reason, member: event.identity, condition: event.condition }, `member ${event.identity} left`);
        break;
      case 'MemberRemoved':
        this.log.warn(
          { event: event.reason, member: event.identity, unknownForMs: event.unknownForMs, activeJobsWhenUnknown: event.activeJobsWhenUnknown },
          `removed member ${event.identity}: Unknown for ${event.unknownForMs} ms`,
        );
        break;
      case 'DisruptionChanged':
        this.log.warn(
          { event: event.reason, from: event.from, to: event.to, unhealthy: event.unhealthy, total: event.total, removalRate: this.health.removalRate },
          `disruption ${event.from} → ${event.to}: ${event.unhealthy} of ${event.total} member(s) not Ready`,
        );
        break;
    }
    this.options.onEvent?.(event);
  }
}
