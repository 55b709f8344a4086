import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { Heartbeat, type MemberReport } from '../../src/members/heartbeat.js';
import type { MemberCondition, MemberEvent } from '../../src/members/health.js';
import { MemberMonitor } from '../../src/members/monitor.js';
import { resolveMemberSettings, type MemberSettings } from '../../src/members/settings.js';
import { MemberStore } from '../../src/members/store.js';
import { KeySpace } from '../../src/redis/keys.js';
import { createMetrics } from '../../src/serving/metrics.js';
import type { Clock } from '../../src/util/clock.js';
import { silentLogger } from '../../src/util/logger.js';
import { ManualClock } from '../support/manual-clock.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
import { SkewedClock } from './support.js';

/** The defaults: heartbeat 5 s, grace 20 s, removal 60 s, 0.1 removals/s, 0.01 in partial disruption. */
const SETTINGS: MemberSettings = resolveMemberSettings();
const LEADER = 'leader';

interface FakeMember {
  identity: string;
  heartbeat: Heartbeat;
  /** A stopped member writes no more heartbeats: a crash, or a partition seen from the leader. */
  alive: boolean;
  report: MemberReport;
}

/**
 * Members with real heartbeats into a real Redis and the leader's monitor, all on one manual clock. Each
 * `step` moves time by one heartbeat interval, lets every live member beat, then runs one monitor pass.
 */
class Harness {
  readonly clock = new ManualClock();
  readonly start = this.clock.now();
  readonly store: MemberStore;
  readonly members = new Map<string, FakeMember>();
  readonly events: Array<{ at: number; event: MemberEvent }> = [];
  readonly metrics = createMetrics();
  monitor!: MemberMonitor;

  constructor(redis: Redis, cluster: string) {
    this.store = new MemberStore(redis, new KeySpace('leasebeat', cluster));
  }

  add(identity: string, options: { clock?: Clock; activeJobIds?: string[] } = {}): FakeMember {
    const activeJobIds = options.activeJobIds ?? [];
    const member: FakeMember = {
      identity,
      alive: true,
      report: {
        role: identity === LEADER ? 'leader' : 'follower',
        workers: 'running',
        activeJobs: activeJobIds.length,
        activeJobIds,
        cordoned: false,
        draining: false,
        ready: true,
      },
      heartbeat: undefined as never,
    };
    member.heartbeat = new Heartbeat({
      store: this.store,
      identity,
      version: 'test',
      clock: options.clock ?? this.clock,
      intervalMs: SETTINGS.heartbeatIntervalMs,
      timeoutMs: SETTINGS.graceMs,
      logger: silentLogger,
      report: () => member.report,
      onCordon: () => Promise.resolve(false),
    });
    this.members.set(identity, member);
    return member;
  }

  /** A new leader's monitor, starting from nothing. */
  newMonitor(settings: MemberSettings = SETTINGS): MemberMonitor {
    this.monitor = new MemberMonitor({
      store: this.store,
      self: LEADER,
      settings,
      clock: this.clock,
      logger: silentLogger,
      metrics: this.metrics.memberMetrics,
      onEvent: (event) => this.events.push({ at: this.elapsed(), event }),
    });
    return this.monitor;
  }

  elapsed(): number {
    return this.clock.now() - this.start;
  }

  async beatAll(): Promise<void> {
    for (const member of this.members.values()) if (member.alive) await member.heartbeat.beat();
  }

  async step(ms = SETTINGS.heartbeatIntervalMs): Promise<void> {
    await this.clock.advance(ms);
    await this.beatAll();
    await this.monitor.pass();
  }

  /** Steps until `elapsed()` reaches `at`. */
  async stepUntil(at: number): Promise<void> {
    while (this.elapsed() < at) await this.step();
  }

  async conditions(): Promise<Record<string, MemberCondition>> {
    const view = await this.store.health();
    return Object.fromEntries((view?.members ?? []).map((m) => [m.identity, m.condition]));
  }

  eventsOf(reason: MemberEvent['reason']): Array<{ at: number; event: MemberEvent }> {
    return this.events.filter((e) => e.event.reason === reason);
  }

  removals(): Array<{ at: number; identity: string }> {
    return this.eventsOf('MemberRemoved').map(({ at, event }) => ({ at, identity: (event as { identity: string }).identity }));
  }
}

describe('member health on a real Redis, stepped with a manual clock', () => {
  const redis = useRedis();
  let clusters = 0;
  const harness = (): Harness => new Harness(redis.client, `members-${++clusters}`);

  it('a member goes Unknown after the grace period, not before, and Unknown members are removed at the configured rate', async () => {
    const h = harness();
    h.add(LEADER);
    for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) h.add(id, { activeJobIds: id === 'a' ? ['reports/nightly@1'] : [] });
    await h.beatAll();
    h.newMonitor();
    assert.deepEqual(await h.monitor.pass(), [], 'the first pass only rebuilds state');

    // a, b and c stop after one more beat: their last change was seen at t = 5 s, on the leader's clock.
    await h.step();
    const lastSeen = h.elapsed();
    for (const id of ['a', 'b', 'c']) h.members.get(id)!.alive = false;
    await h.stepUntil(lastSeen + SETTINGS.graceMs);
    assert.equal((await h.conditions()).a, 'Ready', 'exactly the grace period without a change is still Ready');
    await h.step();
    const conditions = await h.conditions();
    assert.deepEqual([conditions.a, conditions.b, conditions.c, conditions.d], ['Unknown', 'Unknown', 'Unknown', 'Ready']);
    const unknownAt = h.elapsed();
    assert.deepEqual(
      h.eventsOf('ConditionChanged').map(({ at, event }) => [at, (event as { identity: string }).identity, (event as { from: string }).from]),
      [
        [unknownAt, 'a', 'Ready'],
        [unknownAt, 'b', 'Ready'],
        [unknownAt, 'c', 'Ready'],
      ],
    );
    const view = await h.store.health();
    assert.equal(view?.disruption, 'Normal', '3 of 7 unhealthy is below the 0.55 threshold');
    assert.deepEqual(view?.members.find((m) => m.identity === 'a')?.activeJobsWhenUnknown, ['reports/nightly@1']);
    assert.equal(view?.members.find((m) => m.identity === 'a')?.heartbeatAgeMs, unknownAt - lastSeen);

    // Removal: Unknown for longer than 60 s, then one per 10 s (0.1/s, burst 1).
    await h.stepUntil(unknownAt + 120_000);
    assert.deepEqual(h.removals(), [
      { at: unknownAt + 65_000, identity: 'a' },
      { at: unknownAt + 75_000, identity: 'b' },
      { at: unknownAt + 85_000, identity: 'c' },
    ]);
    const removed = h.eventsOf('MemberRemoved')[0]!.event as { activeJobsWhenUnknown: string[]; unknownForMs: number };
    assert.deepEqual(removed.activeJobsWhenUnknown, ['reports/nightly@1']);
    assert.equal(removed.unknownForMs, 65_000);
    assert.deepEqual([...(await h.store.list()).keys()].sort(), ['d', 'e', 'f', LEADER]);
    assert.deepEqual(h.eventsOf('DisruptionChanged'), [], 'the cluster stayed in Normal throughout');
  });

  it('removes nothing in FullDisruption, however long it lasts, and resumes when a member is heard again', async () => {
    const h = harness();
    h.add(LEADER);
    for (const id of ['a', 'b', 'c']) h.add(id);
    await h.beatAll();
    h.newMonitor();
    await h.monitor.pass();
    for (const id of ['a', 'b', 'c']) h.members.get(id)!.alive = false;

    await h.stepUntil(SETTINGS.graceMs + SETTINGS.heartbeatIntervalMs);
    assert.deepEqual(
      h.eventsOf('DisruptionChanged').map(({ event }) => [(event as { from: string }).from, (event as { to: string }).to]),
      [['Normal', 'FullDisruption']],
    );
    const metricsText = await h.metrics.registry.metrics();
    assert.match(metricsText, /^leasebeat_members\{condition="Unknown"\} 3$/m);
    assert.match(metricsText, /^leasebeat_members\{condition="Ready"\} 1$/m);
    assert.match(metricsText, /^leasebeat_disruption_state 2$/m);

    // Ten minutes, ten times the removal timeout: every other member stays, since the leader is the likelier fault.
    await h.stepUntil(10 * 60_000);
    assert.deepEqual(h.removals(), []);
    assert.equal((await h.store.list()).size, 4);
    assert.equal((await h.store.health())?.disruption, 'FullDisruption');

    // One member is heard again: 2 of 4 unhealthy is Normal, and removals resume at the normal rate.
    h.members.get('a')!.alive = true;
    await h.step();
    const resumedAt = h.elapsed();
    assert.equal((await h.conditions()).a, 'Ready');
    assert.equal((await h.store.health())?.disruption, 'Normal');
    await h.stepUntil(resumedAt + 30_000);
    assert.deepEqual(h.removals(), [
      { at: resumedAt, identity: 'b' },
      { at: resumedAt + 10_000, identity: 'c' },
    ]);
    assert.match(await h.metrics.registry.metrics(), /^leasebeat_disruption_state 0$/m);
  });

  it('removes at the lower rate in PartialDisruption, and at the normal rate once it is over', async () => {
    const h = harness();
    h.add(LEADER);
    const dead = ['d1', 'd2', 'd3', 'd4', 'd5', 'd6'];
    for (const id of ['a', 'b', 'c', ...dead]) h.add(id);
    await h.beatAll();
    h.newMonitor();
    await h.monitor.pass();
    // Their last change is seen on the leader's clock, one beat later: the countdown starts exactly there.
    await h.step();
    const lastSeen = h.elapsed();
    for (const id of dead) h.members.get(id)!.alive = false;

    await h.stepUntil(lastSeen + SETTINGS.graceMs + SETTINGS.heartbeatIntervalMs);
    const unknownAt = h.elapsed();
    assert.equal((await h.store.health())?.disruption, 'PartialDisruption', '6 of 10 unhealthy is above 0.55');
    await h.stepUntil(unknownAt + 300_000);
    const removals = h.removals();
    // 6/10 and 5/9 are above the threshold: 100 s between the first two removals (0.01/s). 4/8 is not.
    assert.deepEqual(
      removals.slice(0, 4).map((r) => r.at - unknownAt),
      [65_000, 165_000, 175_000, 185_000],
    );
    assert.deepEqual(
      h.eventsOf('DisruptionChanged').map(({ at, event }) => [at - unknownAt, (event as { to: string }).to]),
      [
        [0, 'PartialDisruption'],
        [165_000, 'Normal'],
      ],
    );
    assert.equal(removals.length, 6);
  });

  it('a ±1 h clock skew on a member, even a clock stepped mid-run, does not change its condition', async () => {
    const h = harness();
    h.add(LEADER);
    const ahead = new SkewedClock(h.clock, 3_600_000);
    const behind = new SkewedClock(h.clock, -3_600_000);
    const stepped = new SkewedClock(h.clock, 0);
    h.add('ahead', { clock: ahead });
    h.add('behind', { clock: behind });
    h.add('stepped', { clock: stepped });
    h.add('stopped');
    await h.beatAll();
    h.newMonitor();
    await h.monitor.pass();
    h.members.get('stopped')!.alive = false;

    const records = await h.store.list();
    assert.equal(records.get('ahead')!.record.startedAt, h.start + 3_600_000, 'the skew reached the record');
    assert.equal(records.get('behind')!.record.startedAt, h.start - 3_600_000);

    for (let i = 0; i < 24; i++) {
      if (i === 8) stepped.offsetMs = 3_600_000;
      if (i === 16) stepped.offsetMs = -3_600_000;
      await h.step();
      const conditions = await h.conditions();
      assert.deepEqual([conditions.ahead, conditions.behind, conditions.stepped], ['Ready', 'Ready', 'Ready'], `at step ${i}`);
    }
    const changed = h.eventsOf('ConditionChanged').map(({ event }) => (event as { identity: string }).identity);
    assert.deepEqual(changed, ['stopped'], 'only the member that stopped writing changed condition (the test is not vacuous)');
  });

  it("a new leader judges members from their Redis-stamped writes: one silent past the grace is Unknown at its first pass", async () => {
    const h = harness();
    // Real intervals, short: the ages come from Redis' own clock, which the manual clock does not move.
    const settings = resolveMemberSettings({ heartbeatIntervalMs: 50, graceMs: 150 });
    h.add(LEADER);
    h.add('a');
    h.add('gone', { activeJobIds: ['reports/nightly@1'] });
    await h.beatAll();
    h.members.get('gone')!.alive = false;
    await until("gone's last write to be older than the grace by Redis' clock", async () => ((await h.store.list()).get('gone')?.ageMs ?? 0) > settings.graceMs, 30_000);
    await h.beatAll();

    const takeover = h.elapsed();
    h.newMonitor(settings);
    assert.deepEqual(await h.monitor.pass(), [], 'the first pass rebuilds state: no events');
    const view = await h.store.health();
    const judged = new Map(view?.members.map((m) => [m.identity, m]));
    assert.deepEqual([judged.get(LEADER)?.condition, judged.get('a')?.condition, judged.get('gone')?.condition], ['Ready', 'Ready', 'Unknown']);
    assert.ok(judged.get('gone')!.heartbeatAgeMs > settings.graceMs, `its age is its last write's, not the takeover's (${judged.get('gone')!.heartbeatAgeMs} ms)`);
    assert.deepEqual(judged.get('gone')?.activeJobsWhenUnknown, ['reports/nightly@1']);

    // Its removal still waits the full timeout, counted from this leader's judgement.
    const removedAt = takeover + settings.removalTimeoutMs + SETTINGS.heartbeatIntervalMs;
    await h.stepUntil(removedAt);
    assert.deepEqual(h.removals(), [{ at: removedAt, identity: 'gone' }], 'the first step past the timeout');
  });

  it('member metrics come from the leader only: they are cleared when its monitor stops', async () => {
    const h = harness();
    h.add(LEADER);
    h.add('a');
    await h.beatAll();
    const leadership = new AbortController();
    const running = h.newMonitor().run(leadership.signal);
    // The loop's first pass runs at once, on real Redis I/O: wait for it, then time stands still.
    const leading = await until('the first pass', async () => {
      const text = await h.metrics.registry.metrics();
      return /^leasebeat_members\{condition="Ready"\} 2$/m.test(text) ? text : undefined;
    }, 30_000);
    assert.match(leading, /^leasebeat_disruption_state 0$/m);
    leadership.abort();
    await running;
    const after = await h.metrics.registry.metrics();
    assert.doesNotMatch(after, /^leasebeat_members\{/m);
    assert.doesNotMatch(after, /^leasebeat_disruption_state /m);
    assert.match(after, /^# TYPE leasebeat_disruption_state gauge$/m);
  });

  it('NotReady comes from the member, joins and clean departures are events, and a member that wrote since is never removed', async () => {
    const h = harness();
    h.add(LEADER);
    const a = h.add('a');
    await h.beatAll();
    h.newMonitor();
    await h.monitor.pass();

    a.report = { ...a.report, ready: false, reason: 'no jobs loaded (0 loaded, 2 failed)', workers: 'running' };
    await h.step();
    assert.equal((await h.conditions()).a, 'NotReady');
    const notReady = h.eventsOf('ConditionChanged')[0]!.event as { to: string; detail: string };
    assert.deepEqual([notReady.to, notReady.detail], ['NotReady', 'no jobs loaded (0 loaded, 2 failed)']);

    h.add('late');
    await h.step();
    assert.deepEqual(h.eventsOf('MemberJoined').map(({ event }) => (event as { identity: string }).identity), ['late']);

    await h.members.get('late')!.heartbeat.leave();
    h.members.delete('late');
    await h.step();
    assert.deepEqual(h.eventsOf('MemberLeft').map(({ event }) => (event as { identity: string }).identity), ['late']);

    // The store's compare-and-delete: a record that changed since the leader read it stays.
    const [observed] = [...(await h.store.list()).values()].filter((o) => o.record.identity === 'a');
    await a.heartbeat.beat();
    assert.equal(await h.store.remove('a', observed!.raw), false);
    assert.equal((await h.store.list()).has('a'), true);
  });
});
