import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CronCalendar } from '../../src/scheduling/cron.js';

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
