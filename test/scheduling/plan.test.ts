import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CronExpressionParser } from 'cron-parser';
import {
  decideOverlap,
  missedWindow,
  jitterMs,
  nextTick,
  nextTicks,
  planCatchup,
  planLateStaged,
  spansOfEnded,
  ticksInRange,
  type RunState,
} from '../../src/scheduling/plan.js';
import { at, iso, scheduledJob, takeover } from './helpers.js';

const MINUTE = 60_000;
const isoTicks = (ticks: number[]): Array<string | undefined> => ticks.map(iso);

describe('cron ticks', () => {
  it('lists the next ticks strictly after a time', () => {
    const job = scheduledJob({ schedule: '*/15 * * * *' });
    assert.deepEqual(isoTicks(nextTicks(job, at('2026-01-01T00:07:00Z'), 4)), [
      '2026-01-01T00:15:00.000Z',
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T00:45:00.000Z',
      '2026-01-01T01:00:00.000Z',
    ]);
    assert.equal(iso(nextTick(job, at('2026-01-01T00:15:00Z'))), '2026-01-01T00:30:00.000Z');
    assert.equal(iso(nextTick(job, at('2026-01-01T00:14:59.999Z'))), '2026-01-01T00:15:00.000Z');
    // A takeover runs the newest tick at or before its time.
    const before = at('2025-12-31T23:00:00Z');
    assert.equal(iso(takeover(job, before, at('2026-01-01T00:15:00Z')).newest), '2026-01-01T00:15:00.000Z');
    assert.equal(iso(takeover(job, before, at('2026-01-01T00:14:59.999Z')).newest), '2026-01-01T00:00:00.000Z');
  });

  it('supports a seconds field', () => {
    const job = scheduledJob({ schedule: '*/20 * * * * *' });
    assert.deepEqual(isoTicks(nextTicks(job, at('2026-01-01T00:00:05Z'), 3)), [
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
  });

  it('reads the schedule in the job timezone', () => {
    const berlin = scheduledJob({ schedule: '0 9 * * 1-5', timezone: 'Europe/Berlin' });
    assert.deepEqual(isoTicks(nextTicks(berlin, at('2026-01-02T12:00:00Z'), 2)), [
      '2026-01-05T08:00:00.000Z', // Monday, CET (+01:00)
      '2026-01-06T08:00:00.000Z',
    ]);
    assert.equal(iso(nextTick(berlin, at('2026-07-01T00:00:00Z'))), '2026-07-01T07:00:00.000Z'); // CEST (+02:00)
    const kolkata = scheduledJob({ schedule: '0 0 * * *', timezone: 'Asia/Kolkata' });
    assert.equal(iso(nextTick(kolkata, at('2026-01-01T00:00:00Z'))), '2026-01-01T18:30:00.000Z');
    const newYork = scheduledJob({ schedule: '0 9 1 * *', timezone: 'America/New_York' });
    assert.equal(iso(nextTick(newYork, at('2026-01-01T00:00:00Z'))), '2026-01-01T14:00:00.000Z');
  });

  it('agrees with cron-parser away from daylight-saving changes', () => {
    const expressions = [
      '*/7 * * * *',
      '*/20 * * * * *',
      '0 0 L * *',
      '0 9 * * 1-5',
      '15 10 * * 5#3',
      '0 12 * * 5L',
      '0 0 1,15 * 3',
      '0 0 29 2 *',
      '@weekly',
      '5 4 * JAN,JUL SUN',
      'H H * * *',
    ];
    for (const timezone of ['UTC', 'Asia/Kolkata', 'America/New_York']) {
      for (const schedule of expressions) {
        const job = scheduledJob({ name: 'compare', schedule, timezone });
        const start = at('2026-11-05T00:00:00Z'); // no tick compared falls in a skipped or repeated hour
        const reference = CronExpressionParser.parse(schedule, { currentDate: new Date(start), tz: timezone, hashSeed: 'compare' });
        const expected = reference.take(schedule === '0 0 29 2 *' ? 2 : 40).map((date) => date.getTime());
        assert.deepEqual(isoTicks(nextTicks(job, start, expected.length)), isoTicks(expected), `${schedule} in ${timezone}`);
      }
    }
  });

  it('a takeover counts the owed ticks without enumerating them, equal to the enumeration', () => {
    for (const schedule of ['*/7 * * * *', '0 9 * * 1-5', '*/20 * * * * *', '0 0 L * *']) {
      const job = scheduledJob({ schedule, timezone: 'Europe/Berlin' });
      const from = at('2026-01-30T10:11:12.345Z');
      const to = at('2026-03-02T00:00:00Z');
      let enumerated = 0;
      for (let tick = nextTick(job, from); tick !== undefined && tick <= to; tick = nextTick(job, tick)) enumerated++;
      assert.equal(takeover(job, from, to).owed, enumerated, schedule);
    }
    const perSecond = scheduledJob({ schedule: '* * * * * *' });
    assert.equal(takeover(perSecond, at('2026-01-01T00:00:00Z'), at('2026-01-31T00:00:00Z')).owed, 30 * 86_400);
  });
});

describe('every ticks', () => {
  it('aligns to multiples of the interval since the Unix epoch', () => {
    const job = scheduledJob({ every: '7m' });
    const ticks = nextTicks(job, at('2026-01-01T00:00:00Z'), 3);
    for (const tick of ticks) assert.equal(tick % (7 * MINUTE), 0);
    assert.equal(ticks[1]! - ticks[0]!, 7 * MINUTE);
    assert.ok(ticks[0]! > at('2026-01-01T00:00:00Z') && ticks[0]! <= at('2026-01-01T00:07:00Z'));
    // Two leaders asking at different times agree on the ticks.
    assert.equal(nextTick(scheduledJob({ every: '7m' }), ticks[0]! - 1), ticks[0]);
  });

  it('aligns to startAt when given, and ticks at startAt itself', () => {
    const job = scheduledJob({ every: '10m', startAt: '2026-01-01T00:03:00Z' });
    assert.deepEqual(isoTicks(nextTicks(job, 0, 2)), ['2026-01-01T00:03:00.000Z', '2026-01-01T00:13:00.000Z']);
    assert.equal(iso(nextTick(job, at('2026-01-01T05:00:00Z'))), '2026-01-01T05:03:00.000Z');
    assert.equal(takeover(job, 0, at('2026-01-01T00:02:59Z')).newest, undefined);
  });
});

describe('startAt and endAt', () => {
  it('bound ticks inclusively', () => {
    const job = scheduledJob({ schedule: '0 * * * *', startAt: '2026-01-01T05:30:00Z', endAt: '2026-01-01T08:00:00Z' });
    assert.deepEqual(isoTicks(nextTicks(job, 0, 10)), [
      '2026-01-01T06:00:00.000Z',
      '2026-01-01T07:00:00.000Z',
      '2026-01-01T08:00:00.000Z',
    ]);
    assert.equal(nextTick(job, at('2026-01-01T08:00:00Z')), undefined);
    assert.equal(iso(takeover(job, 0, at('2027-01-01T00:00:00Z')).newest), '2026-01-01T08:00:00.000Z');
    assert.equal(takeover(job, 0, at('2026-01-01T05:59:59Z')).newest, undefined);
    assert.equal(takeover(job, 0, at('2030-01-01T00:00:00Z')).owed, 3);
    assert.equal(takeover(job, at('2026-01-01T06:00:00Z'), at('2026-01-01T07:30:00Z')).owed, 1);
  });
});

describe('ticksInRange', () => {
  it('lists the ticks of a half-open range (from, to]', () => {
    const job = scheduledJob({ schedule: '*/10 * * * *' });
    const { ticks, rest } = ticksInRange(job, at('2026-01-01T00:00:00Z'), at('2026-01-01T00:30:00Z'));
    assert.deepEqual(isoTicks(ticks), ['2026-01-01T00:10:00.000Z', '2026-01-01T00:20:00.000Z', '2026-01-01T00:30:00.000Z']);
    assert.equal(rest, undefined);
  });

  it('summarises what lies beyond the cap instead of enumerating it', () => {
    const job = scheduledJob({ schedule: '* * * * * *' });
    const from = at('2026-01-01T00:00:00Z');
    const { ticks, rest } = ticksInRange(job, from, from + 86_400_000);
    assert.equal(ticks.length, 1000);
    assert.equal(iso(ticks[999]), '2026-01-01T00:16:40.000Z');
    assert.deepEqual(rest, { from: at('2026-01-01T00:16:41Z'), to: at('2026-01-02T00:00:00Z'), count: 85_400 });
    assert.deepEqual(ticksInRange(job, from, from + 5_000, 5).rest, undefined);
    assert.deepEqual(ticksInRange(job, from, from + 6_000, 5).rest, { from: from + 6_000, to: from + 6_000, count: 1 });
  });
});

describe('jitterMs', () => {
  it('is deterministic per (job name, tick), for any leader', () => {
    const one = scheduledJob({ name: 'sync', every: '1h', jitter: '10m' });
    const other = scheduledJob({ name: 'sync', every: '1h', jitter: '10m' }); // as another leader would load it
    const renamed = scheduledJob({ name: 'sync-2', every: '1h', jitter: '10m' });
    const ticks = nextTicks(one, 0, 200);
    const values = ticks.map((tick) => jitterMs(one, tick));
    assert.deepEqual(ticks.map((tick) => jitterMs(other, tick)), values);
    assert.notDeepEqual(ticks.map((tick) => jitterMs(renamed, tick)), values);
    assert.ok(new Set(values).size > 190, 'spreads over the range');
    assert.ok(values.every((value) => Number.isInteger(value) && value >= 0 && value < 10 * MINUTE));
    assert.ok(Math.min(...values) < MINUTE && Math.max(...values) > 9 * MINUTE);
  });

  it('never reaches the next tick', () => {
    const job = scheduledJob({ every: '1m', jitter: '1h' });
    for (const tick of nextTicks(job, 0, 500)) assert.ok(jitterMs(job, tick) < MINUTE);
    const weekdays = scheduledJob({ schedule: '0 9 * * 1-5', jitter: '2d' });
    const friday = at('2026-01-02T09:00:00Z');
    const thursday = at('2026-01-01T09:00:00Z');
    assert.ok(jitterMs(weekdays, thursday) < 86_400_000);
    assert.ok(jitterMs(weekdays, friday) < 2 * 86_400_000); // Monday is three days away: the jitter bound applies
  });

  it('is 0 without jitter', () => {
    assert.equal(jitterMs(scheduledJob({ every: '1m' }), at('2026-01-01T00:01:00Z')), 0);
  });
});

describe('planCatchup', () => {
  const last = at('2026-01-01T00:00:00Z');
  const now = last + 30 * MINUTE + 30_000; // 30 missed minutely ticks; the 5-minute window holds 26..30
  const minute = (n: number): number => last + n * MINUTE;
  const job = (catchup: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    scheduledJob({ every: '1m', catchup, ...extra });

  it('does not backfill a job that was never scheduled', () => {
    assert.deepEqual(planCatchup(job(), undefined, now), { enqueue: [], skipped: [] });
  });

  it('latest (the default): the newest tick in the window runs; older ones are skipped with reasons', () => {
    assert.deepEqual(planCatchup(job(), last, now), {
      enqueue: [minute(30)],
      skipped: [
        { from: minute(1), to: minute(25), count: 25, reason: 'missed-window' },
        { from: minute(26), to: minute(29), count: 4, reason: 'catchup-limit' },
      ],
    });
  });

  it('all: up to max of the newest ticks in the window run', () => {
    assert.deepEqual(planCatchup(job({ mode: 'all', max: 3 }), last, now), {
      enqueue: [minute(28), minute(29), minute(30)],
      skipped: [
        { from: minute(1), to: minute(25), count: 25, reason: 'missed-window' },
        { from: minute(26), to: minute(27), count: 2, reason: 'catchup-limit' },
      ],
    });
    assert.deepEqual(planCatchup(job({ mode: 'all' }), last, now), {
      enqueue: [minute(26), minute(27), minute(28), minute(29), minute(30)],
      skipped: [{ from: minute(1), to: minute(25), count: 25, reason: 'missed-window' }],
    });
  });

  it('none: every missed tick is skipped', () => {
    assert.deepEqual(planCatchup(job({ mode: 'none' }), last, now), {
      enqueue: [],
      skipped: [
        { from: minute(1), to: minute(25), count: 25, reason: 'missed-window' },
        { from: minute(26), to: minute(30), count: 5, reason: 'catchup-limit' },
      ],
    });
  });

  it('a short gap inside the window skips nothing as missed-window', () => {
    assert.deepEqual(planCatchup(job(), last, minute(2) + 10_000), {
      enqueue: [minute(2)],
      skipped: [{ from: minute(1), to: minute(1), count: 1, reason: 'catchup-limit' }],
    });
    assert.deepEqual(planCatchup(job(), last, minute(1) - 1), { enqueue: [], skipped: [] });
  });

  it('a tick exactly at the window edge is still inside it', () => {
    assert.deepEqual(planCatchup(job({ window: '5m', mode: 'all' }), last, minute(10)).enqueue, [
      minute(5),
      minute(6),
      minute(7),
      minute(8),
      minute(9),
      minute(10),
    ]);
    assert.deepEqual(planCatchup(job({ window: 0 }), last, minute(10)).enqueue, [minute(10)]);
  });

  it('a paused job skips all missed ticks as paused', () => {
    assert.deepEqual(planCatchup(job({}, { paused: true }), last, now), {
      enqueue: [],
      skipped: [{ from: minute(1), to: minute(30), count: 30, reason: 'paused' }],
    });
  });

  it('a pause set at run time (passed by the caller) skips all missed ticks as paused; false plans as unpaused', () => {
    assert.deepEqual(planCatchup(job(), last, now, true), {
      enqueue: [],
      skipped: [{ from: minute(1), to: minute(30), count: 30, reason: 'paused' }],
    });
    assert.deepEqual(planCatchup(job(), last, now, false), planCatchup(job(), last, now));
  });

  it('respects endAt', () => {
    assert.deepEqual(planCatchup(job({ mode: 'all' }, { endAt: iso(minute(27)) }), last, now), {
      enqueue: [minute(26), minute(27)],
      skipped: [{ from: minute(1), to: minute(25), count: 25, reason: 'missed-window' }],
    });
  });

  it('a takeover a fraction of a millisecond before a tick never plans an inverted or empty skip', () => {
    // A fractional "now" (Redis TIME offset) just before :41 once planned { from: :41, to: :40, count: 1 }.
    const perSecond = scheduledJob({ schedule: '* * * * * *' });
    const lastTick = at('2026-01-01T17:33:40Z');
    for (const now of [lastTick + 1000 - 0.3, lastTick + 999.999, lastTick + 999]) {
      assert.deepEqual(planCatchup(perSecond, lastTick, now), { enqueue: [], skipped: [] }, String(now));
    }
    assert.deepEqual(planCatchup(perSecond, lastTick, lastTick + 1000.7), { enqueue: [lastTick + 1000], skipped: [] });
    assert.equal(takeover(perSecond, lastTick, lastTick + 999.7).owed, 0);
    assert.equal(takeover(perSecond, lastTick - 0.5, lastTick + 999.7).owed, 1);
    assert.equal(takeover(perSecond, lastTick - 1, lastTick + 999.7).newest, lastTick);
    assert.equal(nextTick(perSecond, lastTick + 999.7), lastTick + 1000);
    assert.deepEqual(ticksInRange(perSecond, lastTick + 0.2, lastTick + 2000.5, 1).rest, { from: lastTick + 2000, to: lastTick + 2000, count: 1 });
  });

  it('every skipped span it plans is ordered and non-empty, for fractional instants too', () => {
    const jobs = [scheduledJob({ schedule: '* * * * * *' }), scheduledJob({ schedule: '*/7 * * * * *', catchup: { window: '20s', mode: 'all', max: 2 } }), scheduledJob({ every: '1s', catchup: { window: 0 } })];
    const base = at('2026-01-01T00:00:00Z');
    for (const job of jobs) {
      for (let step = 0; step < 400; step++) {
        const lastTick = nextTick(job, base + step * 137)!;
        const now = lastTick + step * 61.37 + (step % 7) * 0.13;
        for (const span of planCatchup(job, lastTick, now).skipped) {
          assert.ok(span.from <= span.to && span.count >= 1, JSON.stringify({ lastTick, now, span }));
          assert.equal(nextTick(job, span.from - 1), span.from, JSON.stringify({ lastTick, now, span }));
          let enumerated = 0;
          for (let tick = nextTick(job, span.from - 1); tick !== undefined && tick <= span.to; tick = nextTick(job, tick)) enumerated++;
          assert.equal(span.count, enumerated, JSON.stringify({ lastTick, now, span }));
        }
      }
    }
  });

  it('summarises a per-second job down for a day without enumerating it', () => {
    const perSecond = scheduledJob({ schedule: '* * * * * *', catchup: { mode: 'all', max: 2, window: '1m' } });
    const start = at('2026-01-01T00:00:00Z');
    const end = start + 86_400_000;
    assert.deepEqual(planCatchup(perSecond, start, end), {
      enqueue: [end - 1000, end],
      skipped: [
        { from: start + 1000, to: end - 61_000, count: 86_339, reason: 'missed-window' },
        { from: end - 60_000, to: end - 2000, count: 59, reason: 'catchup-limit' },
      ],
    });
  });
});

describe('missedWindow', () => {
  const job = scheduledJob({ every: '1s', catchup: { window: '10s' } });
  const base = at('2026-01-01T00:00:00Z');

  it('spans the owed ticks older than the window, with the window edge of planCatchup', () => {
    assert.deepEqual(missedWindow(job, base, base + 30_000), { from: base + 1000, to: base + 19_000, count: 19, reason: 'missed-window' });
    assert.equal(missedWindow(job, base, base + 11_000), undefined, 'the oldest owed tick is exactly at the window edge');
    assert.equal(missedWindow(job, base + 25_000, base + 30_000), undefined);
    assert.deepEqual(missedWindow(job, base, base + 11_000.9), missedWindow(job, base, base + 11_000));
  });
});

describe('spansOfEnded: the ticks versions a write ended owed, each by its own definition', () => {
  const base = at('2026-01-01T00:00:00Z');
  const everySecond = scheduledJob({ every: '1s' });
  const everyTwo = scheduledJob({ every: '2s' });

  it('counts each version from its own write to its end, the oldest from the watermark', () => {
    const versions = [
      { job: everySecond, definedAt: base, endedAt: base + 4_500, removed: false },
      { job: everyTwo, definedAt: base + 4_500, endedAt: base + 8_500, removed: true },
    ];
    assert.deepEqual(spansOfEnded(versions, base + 1_000, base + 8_500), [
      { from: base + 2_000, to: base + 4_000, count: 3, reason: 'rescheduled' },
      { from: base + 6_000, to: base + 8_000, count: 2, reason: 'removed' },
    ]);
  });

  it('skips the versions recorded past their end, stops at upTo, and leaves out one that no longer compiles', () => {
    const versions = [
      { job: everySecond, definedAt: base, endedAt: base + 2_500, removed: false },
      { job: undefined, definedAt: base + 2_500, endedAt: base + 5_500, removed: false },
      { job: everySecond, definedAt: base + 5_500, endedAt: base + 9_500, removed: false },
    ];
    assert.deepEqual(spansOfEnded(versions, base + 3_000, base + 7_000), [{ from: base + 6_000, to: base + 7_000, count: 2, reason: 'rescheduled' }]);
    assert.deepEqual(spansOfEnded(versions, base + 9_500, base + 9_500), []);
  });
});

describe('decideOverlap', () => {
  const states: RunState[] = ['none', 'waiting', 'delayed', 'active', 'finished'];
  const unfinished = new Set<RunState>(['waiting', 'delayed', 'active']);

  it('allow always enqueues', () => {
    for (const state of states) for (const buffered of [false, true]) assert.equal(decideOverlap('allow', state, buffered), 'enqueue');
  });

  it('skip skips while the previous run is unfinished', () => {
    for (const state of states) assert.equal(decideOverlap('skip', state, false), unfinished.has(state) ? 'skip' : 'enqueue');
  });

  it('bufferOne buffers one tick behind an unfinished run and skips the next', () => {
    for (const state of states) {
      assert.equal(decideOverlap('bufferOne', state, false), unfinished.has(state) ? 'buffer' : 'enqueue', state);
    }
  });

  it('never enqueues beside or ahead of a buffered tick, even once the previous run finished', () => {
    for (const state of states) {
      assert.equal(decideOverlap('bufferOne', state, true), 'skip', state);
      assert.equal(decideOverlap('skip', state, true), 'skip', state);
    }
  });

  it('bufferAll buffers every tick behind an unfinished run or a buffered tick, up to its bound, and skips the rest', () => {
    for (const state of states) {
      assert.equal(decideOverlap('bufferAll', state, false, false), unfinished.has(state) ? 'buffer' : 'enqueue', state);
      // Behind a buffered tick even once the previous run finished: the buffered one runs first.
      assert.equal(decideOverlap('bufferAll', state, true, false), 'buffer', state);
      assert.equal(decideOverlap('bufferAll', state, true, true), 'skip', state);
    }
  });

  it('cancelOther cancels an unfinished run and waits for it; terminateOther terminates it and enqueues; a tick buffered meanwhile skips the next', () => {
    for (const state of states) {
      assert.equal(decideOverlap('cancelOther', state, false), unfinished.has(state) ? 'cancel' : 'enqueue', state);
      assert.equal(decideOverlap('terminateOther', state, false), unfinished.has(state) ? 'terminate' : 'enqueue', state);
      // A tick waits for the cancelled run to stop: a newer one neither cancels it again nor overtakes it.
      assert.equal(decideOverlap('cancelOther', state, true), 'skip', state);
    }
  });
});

describe('planLateStaged: runs an earlier term staged that no worker started, decided at a takeover', () => {
  const now = at('2026-03-01T12:00:30Z');
  const late = [at('2026-03-01T12:00:10Z'), at('2026-03-01T12:00:20Z')];
  const none = { enqueue: [], skipped: [] };
  /** A takeover whose term raised the fence after every late run came due: all of them came due with no leader. */
  const afterOutage = { now, fencedAt: now - 1, paused: false };

  it('takes them all back while the job is paused', () => {
    const job = scheduledJob({ every: '10s' });
    assert.deepEqual(planLateStaged(job, late, none, { ...afterOutage, paused: true }), late.map((tick) => ({ tick, reason: 'paused' })));
  });

  it("applies the catch-up policy as to any missed tick: none runs none, latest the newest, all up to max within the window", () => {
    const noneJob = scheduledJob({ every: '10s', catchup: { mode: 'none' } });
    assert.deepEqual(planLateStaged(noneJob, late, none, afterOutage).map((d) => d.reason), ['catchup-limit', 'catchup-limit']);
    const latest = scheduledJob({ every: '10s', catchup: { mode: 'latest' } });
    assert.deepEqual(planLateStaged(latest, late, none, afterOutage), [{ tick: late[0], reason: 'catchup-limit' }], 'the newest is kept');
    assert.deepEqual(planLateStaged(latest, late, { enqueue: [now], skipped: [] }, afterOutage).map((d) => d.tick), late, 'a newer tick the plan runs counts first');
    const all = scheduledJob({ every: '10s', catchup: { mode: 'all', window: '15s', max: 10 } });
    assert.deepEqual(planLateStaged(all, late, none, afterOutage), [{ tick: late[0], reason: 'missed-window' }], 'outside the window');
    assert.deepEqual(planLateStaged(scheduledJob({ every: '10s', catchup: { mode: 'all', max: 10 } }), late, none, afterOutage), []);
  });

  describe('a graceful handover just before a tick (issue 31, finding 3)', () => {
    // The leader of a `* * * * * *` job staged tick T and released the lease 36 ms before it; the next
    // leader raised the fence 20 ms before T, so workers held T for its review, which came 11 ms after T.
    const T = at('2026-03-01T12:00:31Z');
    const handover = { now: T + 11, fencedAt: T - 20, paused: false };
    const everySecond = (catchup?: Record<string, unknown>) => scheduledJob({ name: 'per-second', schedule: '* * * * * *', ...(catchup && { catchup }) });

    it('the tick due after the fence moved is not a missed tick: it is kept in every catch-up mode', () => {
      for (const catchup of [undefined, { mode: 'none' }, { mode: 'all', max: 1 }]) {
        assert.deepEqual(planLateStaged(everySecond(catchup), [T], none, handover), [], JSON.stringify(catchup ?? 'default'));
      }
    });

    it('nor does it count toward the limit, even when the plan also runs a tick', () => {
      // The plan the takeover counted up to a later instant than its read once listed T itself as missed.
      assert.deepEqual(planLateStaged(everySecond(), [T], { enqueue: [T], skipped: [] }, handover), []);
      // A tick that came due while no leader ran (a crash long before) is still decided by the policy, as
      // the newest missed one.
      const crashed = [T - 2_000, T - 1_000];
      assert.deepEqual(planLateStaged(everySecond(), [...crashed, T], none, handover), [{ tick: T - 2_000, reason: 'catchup-limit' }]);
    });

    it('a pause still takes it back', () => {
      assert.deepEqual(planLateStaged(everySecond(), [T], none, { ...handover, paused: true }), [{ tick: T, reason: 'paused' }]);
    });
  });
});
