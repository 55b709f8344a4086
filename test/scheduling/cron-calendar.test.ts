import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CronCalendar, cronProblems } from '../../src/scheduling/cron.js';

describe('CronCalendar.compile shares calendars between schedules', () => {
  it('gives jobs with the same expression one calendar, whatever their names', () => {
    assert.equal(CronCalendar.compile('0 3 * * *', 'tenant-1'), CronCalendar.compile('0 3 * * *', 'tenant-2'));
    assert.equal(CronCalendar.compile('@hourly', 'a'), CronCalendar.compile('@HOURLY', 'b'));
    assert.notEqual(CronCalendar.compile('0 3 * * *', 'a'), CronCalendar.compile('0 4 * * *', 'a'));
  });

  it('shares an H expression only where the hash picks the same times', () => {
    const seeds = Array.from({ length: 200 }, (_, i) => `tenant-${i}`);
    const calendars = seeds.map((seed) => CronCalendar.compile('H * * * *', seed));
    const day = Date.UTC(2026, 0, 1);
    for (const [i, calendar] of calendars.entries()) {
      // Each keeps its own hashed minute: the one the expression picks for its seed.
      assert.equal(calendar.firstAtOrAfter(day), CronCalendar.compile('H * * * *', seeds[i]!).firstAtOrAfter(day));
    }
    const distinct = new Set(calendars);
    const minutes = new Set(calendars.map((calendar) => calendar.firstAtOrAfter(day)));
    assert.equal(distinct.size, minutes.size, 'one calendar per distinct hashed minute');
    assert.ok(distinct.size <= 60);
  });
});

describe('cron caches: what is computed again once dropped is what was kept', () => {
  // More distinct expressions than either cache holds (8,192 checks, 4,096 calendars): the first ones
  // are dropped and computed again.
  const expressions = Array.from({ length: 10_000 }, (_, i) => `${i % 60} ${Math.floor(i / 60) % 24} ${1 + (Math.floor(i / 1440) % 28)} * *`);
  const day = Date.UTC(2026, 0, 1);

  it('answers a calendar with the same ticks, first compiled, kept, or compiled again', () => {
    const first = expressions.map((e) => CronCalendar.compile(e, 'a').firstAtOrAfter(day));
    const second = expressions.map((e) => CronCalendar.compile(e, 'a').firstAtOrAfter(day));
    assert.deepEqual(second, first);
    assert.equal(first[61], Date.UTC(2026, 0, 1, 1, 1));
  });

  it('answers the same problems, first checked, kept, or checked again', () => {
    const mixed = expressions.map((e, i) => (i % 3 === 0 ? `6${e}` : e));
    const first = mixed.map(cronProblems);
    assert.deepEqual(mixed.map(cronProblems), first);
    assert.deepEqual(first[0], ['minute must be 0-59 (got 60)']);
    assert.deepEqual(first[1], []);
  });

  it('hands out a copy of the problems: a caller changing it changes no later answer', () => {
    const problems = cronProblems('61 * * * *');
    problems.push('changed');
    assert.deepEqual(cronProblems('61 * * * *'), ['minute must be 0-59 (got 61)']);
  });
});
