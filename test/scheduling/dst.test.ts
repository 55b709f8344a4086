import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTick, nextTicks, ticksInRange } from '../../src/scheduling/plan.js';
import { at, iso, scheduledJob, takeover } from './helpers.js';

const berlin = (schedule: string): ScheduledJob => scheduledJob({ schedule, timezone: 'Europe/Berlin' });
const isoTicks = (ticks: number[]): Array<string | undefined> => ticks.map(iso);

// Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z; 2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z.
describe('spring forward: a local time in the gap runs once, at the first instant after the gap', () => {
  it('30 2 * * * runs at 03:00 CEST on the day the clocks skip 02:30', () => {
    assert.deepEqual(isoTicks(nextTicks(berlin('30 2 * * *'), at('2026-03-27T12:00:00Z'), 3)), [
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST: the first valid instant after the gap
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
  });

  it('several times in the gap collapse into one run, which a 03:00 tick shares', () => {
    for (const schedule of ['0,30 2 * * *', '*/15 2 * * *', '0 2,3 * * *', '30 2,3 * * *']) {
      const ticks = ticksInRange(berlin(schedule), at('2026-03-28T23:00:00Z'), at('2026-03-29T22:00:00Z')).ticks;
      const expected = schedule === '30 2,3 * * *' ? ['2026-03-29T01:00:00.000Z', '2026-03-29T01:30:00.000Z'] : ['2026-03-29T01:00:00.000Z'];
      assert.deepEqual(isoTicks(ticks), expected, schedule);
    }
  });

  it('a wildcard-hour schedule loses only the skipped hour', () => {
    assert.deepEqual(isoTicks(nextTicks(berlin('*/30 * * * *'), at('2026-03-29T00:00:00Z'), 4)), [
      '2026-03-29T00:30:00.000Z', // 01:30 CET
      '2026-03-29T01:00:00.000Z', // 02:00 and 02:30 do not exist; 03:00 CEST
      '2026-03-29T01:30:00.000Z', // 03:30 CEST
      '2026-03-29T02:00:00.000Z',
    ]);
  });

  it('works for zones with other gaps: New York, and Lord Howe with its 30-minute shift', () => {
    // America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z.
    const newYork = scheduledJob({ schedule: '30 2 * * *', timezone: 'America/New_York' });
    assert.equal(iso(nextTick(newYork, at('2026-03-08T00:00:00Z'))), '2026-03-08T07:00:00.000Z');
    // Australia/Lord_Howe: 2026-10-04 02:00 (+10:30) -> 02:30 (+11:00) at 2026-10-03T15:30Z.
    const lordHowe = scheduledJob({ schedule: '15 2 * * *', timezone: 'Australia/Lord_Howe' });
    assert.deepEqual(isoTicks(nextTicks(lordHowe, at('2026-10-02T00:00:00Z'), 3)), [
      '2026-10-02T15:45:00.000Z', // 02:15 +10:30
      '2026-10-03T15:30:00.000Z', // 02:30 +11:00, the end of the gap
      '2026-10-04T15:15:00.000Z', // 02:15 +11:00
    ]);
  });
});

describe('fall back: a repeated local time runs once, at its first occurrence', () => {
  it('30 2 * * * runs at 02:30 CEST and not again at 02:30 CET', () => {
    assert.deepEqual(isoTicks(nextTicks(berlin('30 2 * * *'), at('2026-10-23T12:00:00Z'), 3)), [
      '2026-10-24T00:30:00.000Z',
      '2026-10-25T00:30:00.000Z', // 02:30 CEST, the first occurrence
      '2026-10-26T01:30:00.000Z', // 02:30 CET the next day
    ]);
  });

  it('gives the same answer from inside either pass through the repeated hour', () => {
    const job = berlin('30 2 * * *');
    for (const from of ['2026-10-25T00:10:00Z', '2026-10-25T00:40:00Z', '2026-10-25T01:00:00Z', '2026-10-25T01:29:59Z', '2026-10-25T01:30:00Z']) {
      const expected = from < '2026-10-25T00:30' ? '2026-10-25T00:30:00.000Z' : '2026-10-26T01:30:00.000Z';
      assert.equal(iso(nextTick(job, at(from))), expected, from);
    }
    // A takeover inside the second pass runs the first occurrence, not one the repeat would add.
    assert.equal(iso(takeover(job, at('2026-10-24T12:00:00Z'), at('2026-10-25T01:45:00Z')).newest), '2026-10-25T00:30:00.000Z');
  });

  it('wildcard-hour schedules also fire nothing during the second pass', () => {
    assert.deepEqual(isoTicks(nextTicks(berlin('0 * * * *'), at('2026-10-24T23:30:00Z'), 3)), [
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T02:00:00.000Z', // 03:00 CET; 02:00 CET (01:00Z) is the repeat
      '2026-10-25T03:00:00.000Z',
    ]);
    assert.deepEqual(isoTicks(ticksInRange(berlin('*/30 * * * *'), at('2026-10-24T23:59:59Z'), at('2026-10-25T02:30:00Z')).ticks), [
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T02:00:00.000Z',
      '2026-10-25T02:30:00.000Z',
    ]);
  });

  it('works for Lord Howe, whose clocks go back 30 minutes', () => {
    // Australia/Lord_Howe: 2026-04-05 02:00 (+11:00) -> 01:30 (+10:30) at 2026-04-04T15:00Z.
    const job = scheduledJob({ schedule: '45 1 * * *', timezone: 'Australia/Lord_Howe' });
    assert.deepEqual(isoTicks(nextTicks(job, at('2026-04-03T00:00:00Z'), 3)), [
      '2026-04-03T14:45:00.000Z',
      '2026-04-04T14:45:00.000Z', // 01:45 +11:00, the first occurrence; not 15:15Z
      '2026-04-05T15:15:00.000Z', // 01:45 +10:30
    ]);
  });

  it('every intervals keep an even rate through both changes', () => {
    for (const day of ['2026-03-28T23:00:00Z', '2026-10-24T23:00:00Z']) {
      const ticks = nextTicks(scheduledJob({ every: '30m' }), at(day), 8);
      assert.deepEqual(ticks.slice(1).map((tick, i) => tick - ticks[i]!), Array<number>(7).fill(1_800_000));
    }
  });
});

describe('the plan is the same whichever tick or time a leader starts from', () => {
  const cases: Array<[string, string]> = [
    ['*/20 * * * *', 'Europe/Berlin'],
    ['30 2 * * *', 'Europe/Berlin'],
    ['0,30 1-3 * * *', 'Europe/Berlin'],
    ['15 * * * * *', 'Europe/Berlin'],
    ['*/10 1-3 * * *', 'America/New_York'],
    ['0,15,45 1,2 * * *', 'Australia/Lord_Howe'],
  ];
  const windows: Array<[string, string]> = [
    ['2026-03-27T00:00:00Z', '2026-03-31T00:00:00Z'],
    ['2026-10-23T00:00:00Z', '2026-10-27T00:00:00Z'],
    ['2026-03-06T00:00:00Z', '2026-03-10T00:00:00Z'],
    ['2026-11-30T00:00:00Z', '2026-12-03T00:00:00Z'], // no change: a control
    ['2026-04-02T00:00:00Z', '2026-04-07T00:00:00Z'],
    ['2026-10-01T00:00:00Z', '2026-10-06T00:00:00Z'],
  ];

  for (const [schedule, timezone] of cases) {
    it(`${schedule} in ${timezone}`, () => {
      const job = scheduledJob({ schedule, timezone });
      for (const [fromIso, toIso] of windows) {
        const from = at(fromIso);
        const to = at(toIso);
        const ticks: number[] = [];
        for (let tick = nextTick(job, from); tick !== undefined && tick <= to; tick = nextTick(job, tick)) ticks.push(tick);
        assert.ok(ticks.every((tick, i) => i === 0 || tick > ticks[i - 1]!), 'strictly increasing');
        assert.equal(takeover(job, from, to).owed, ticks.length, `count over ${fromIso}`);
        // From any instant (every 7 minutes and 13 seconds), the next tick and the newest one a takeover
        // there runs are the neighbours in the list, and a takeover counts the rest as owed.
        for (let instant = from; instant < to; instant += 433_000) {
          const index = ticks.findIndex((tick) => tick > instant);
          if (index === -1) break;
          assert.equal(iso(nextTick(job, instant)), iso(ticks[index]), `next after ${iso(instant)}`);
          assert.equal(iso(takeover(job, from, instant).newest), iso(ticks[index - 1]), `newest at ${iso(instant)}`);
          assert.equal(takeover(job, instant, to).owed, ticks.length - index, `count from ${iso(instant)}`);
        }
      }
    });
  }
});
