import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { Producer } from '../../src/producing/producer.js';
import { TickLedger, type TakeOverRequest, type TakeOverState } from '../../src/ledger/tick-ledger.js';
import { KeySpace } from '../../src/redis/keys.js';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick } from '../../src/scheduling/plan.js';
import { ManualClock } from '../support/manual-clock.js';
import { useFreshLedger } from '../support/fresh-ledger.js';
import { useRedis } from '../support/redis-server.js';
import { scheduledJobWith } from '../support/scheduled-job.js';
import { producerTerms } from '../support/term.js';
import { until } from '../support/until.js';

const logger = pino({ level: process.env.TEST_LOG ?? 'silent' });
/** Staged this far ahead, the first term leaves several runs staged past the next one's takeover. */
const STAGE_AHEAD_MS = 5_000;
/** How late after tick T the next leader's lane goes on from its takeover read (issue 31: 11 ms). */
const LATE_MS = 11;

const perSecond = scheduledJobWith({ every: '1s', handler: () => undefined });

/** A ledger whose takeover read hands `onRead` the instant it describes, before the lane sees the answer. */
class ObservedLedger extends TickLedger {
  onRead: ((readAt: number) => void) | undefined;

  override async takeOverStates(jobs: TakeOverRequest[], now: number): Promise<TakeOverState[]> {
    const states = await super.takeOverStates(jobs, now);
    this.onRead?.(now);
    return states;
  }
}

describe('a handover just before a tick (issue 31, finding 3): the takeover decides as of its read of the ledger', () => {
  const redis = useRedis();
  const base = useFreshLedger(redis);
  let jobs: Map<string, ScheduledJob>;
  const terms = producerTerms(() => ({ redis: redis.client, ledger: base.ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, stageAheadMs: STAGE_AHEAD_MS }));
  afterEach(() => terms.stopAll());

  it('the tick due between the read and the lane’s decision, and the newest missed one before it, both stay staged (default catch-up: latest)', { timeout: 30_000 }, async () => {
    const job = perSecond({ name: 'handover' });
    jobs = new Map([[job.name, job]]);
    // Term 1 stages up to its horizon, then ends (a graceful release: its staged runs stay valid).
    const first = terms.lead(1);
    // Until a tick is due with its run staged: every tick from it to the horizon is staged.
    await until('term 1 to have staged a tick now due', async () => (await base.ledger.tickState(job.name, nextTick(job, Date.now() - 1_000)!))?.startsWith('enqueued|'), 10_000);
    first.stop.abort();
    await first.run;

    // Term 2 on a clock that moves only when told: its takeover reads the ledger at R, then its lane goes on
    // 11 ms after T, the first tick after R. L, the tick before T, is due by R: it came due with no leader.
    const clock = new ManualClock();
    const ledger = new ObservedLedger(redis.client, new KeySpace());
    const read = new Promise<{ readAt: number; tick: number }>((resolve) => {
      ledger.onRead = (readAt) => {
        ledger.onRead = undefined;
        const tick = nextTick(job, readAt)!;
        clock.freeze(tick + LATE_MS - readAt);
        resolve({ readAt, tick });
      };
    });
    const second = new Producer({ redis: redis.client, ledger, queues: base.queues, jobs: () => jobs, stillLeading: () => true, logger, stageAheadMs: STAGE_AHEAD_MS, clock });
    const stop = new AbortController();
    const running = second.run({ holderIdentity: 'leader-2', generation: 'gen-1', leaderTransitions: 2, acquireTime: Date.now() }, stop.signal);
    try {
      const { readAt, tick: T } = await read;
      const L = T - 1_000;
      const { lastScheduledTick } = await base.ledger.jobState(job.name);
      assert.ok(lastScheduledTick !== undefined && lastScheduledTick > T + LATE_MS, `precondition: term 1 staged past T + ${LATE_MS} ms (watermark ${lastScheduledTick}, T ${T}, read at ${readAt})`);
      await until('term 2 to review the job', async () => (await redis.client.hget(base.ledger.keys.jobState(job.name), 'reviewedBy')) === 'gen-1|2', 10_000);

      const queue = new Queue(job.queue, { connection: redis.client });
      try {
        for (const [name, tick] of [['L', L], ['T', T]] as const) {
          assert.equal(await base.ledger.tickState(job.name, tick), `enqueued|handover@${tick}`, `${name} (${tick - readAt} ms after the read) keeps its staged run`);
          assert.notEqual(await queue.getJobState(`handover@${tick}`), 'unknown', `${name}'s staged run is still in BullMQ`);
        }
      } finally {
        await queue.close();
      }
      assert.deepEqual(await base.ledger.skippedRanges(job.name), [], 'no tick was skipped');
    } finally {
      stop.abort();
      await running;
    }
  });
});
