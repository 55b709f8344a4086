import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AIMED_KILLS, describeFault, estimatedMs, faultKinds, planFaults } from '../../scripts/chaos/plan.js';
import { CHAOS_TIMINGS } from '../../scripts/chaos/suite.js';

const plan = (options: Partial<Parameters<typeof planFaults>[0]> = {}): ReturnType<typeof planFaults> =>
  planFaults({ seed: 7, durationMs: 600_000, lock: 'redis', redis: 'cluster', timings: CHAOS_TIMINGS, ...options });

describe("chaos plan: issue 18's aimed kills of a replicated Redis", () => {
  it('are fault kinds of Sentinel and Cluster, for both locks, and of no single Redis', () => {
    for (const redis of ['sentinel', 'cluster'] as const) {
      for (const lock of ['redis', 'kubernetes'] as const) for (const kind of AIMED_KILLS) assert.ok(faultKinds(lock, redis).includes(kind), `${kind} on ${redis} (${lock} lock)`);
    }
    for (const kind of AIMED_KILLS) assert.ok(!faultKinds('redis', 'single').includes(kind));
    assert.throws(() => plan({ redis: 'single', lead: ['bull-primary-kill-after-handler'] }), /no fault kind bull-primary-kill-after-handler for the redis lock on single Redis/);
  });

  it('are drawn from the seeded bag like the others: every one in a long run, the same schedule for the same seed', () => {
    const drawn = plan();
    for (const kind of AIMED_KILLS) assert.ok(drawn.some((f) => f.kind === kind), `${kind} drawn`);
    assert.deepEqual(plan(), drawn);
    assert.notDeepEqual(plan({ seed: 8 }), drawn);
  });

  it('lead a run in the order given, and `--faults` draws only them', () => {
    const lead = ['ledger-primary-kill-between-claim-and-wait', 'bull-primary-kill-after-handler', 'bull-primary-kill-during-staged-delay'];
    assert.deepEqual(plan({ lead, redis: 'sentinel' }).slice(0, 3).map((f) => f.kind), lead);
    const only = plan({ only: ['bull-primary-kill-during-staged-delay'] });
    assert.ok(only.length > 10);
    assert.ok(only.every((f) => f.kind === 'bull-primary-kill-during-staged-delay'));
  });

  it('draw a restart delay, leave time for the aim and the promotion, and describe what they aim at', () => {
    for (const fault of plan({ only: [...AIMED_KILLS] })) {
      assert.ok('restartAfterMs' in fault && fault.restartAfterMs >= 300 && fault.restartAfterMs <= 3000, JSON.stringify(fault));
      assert.ok(estimatedMs(fault) > fault.restartAfterMs + 10_000);
    }
    const [handler, staged, claim] = AIMED_KILLS.map((kind) => describeFault(plan({ lead: [kind] })[0]!));
    assert.match(handler!, /replication of BullMQ's primary held, SIGKILL once a handler returned and the run's finish was written/);
    assert.match(staged!, /SIGKILL of BullMQ's primary while a staged run waits in the delayed set, recorded enqueued/);
    assert.match(claim!, /replication of the ledger's primary held, SIGKILL once a claim was written, before its WAIT is answered/);
  });
});
