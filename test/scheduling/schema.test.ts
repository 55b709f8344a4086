import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineJob, describeTrigger } from '../../src/scheduling/define-job.js';
import { formatDuration, parseDuration } from '../../src/scheduling/duration.js';
import { JOB_DEFAULTS, validateJobDefinition } from '../../src/scheduling/schema.js';
import { errorsOf, scheduledJob } from './helpers.js';

const handler = (): undefined => undefined;
const valid = { name: 'report', schedule: '0 3 * * *', handler };

describe('validateJobDefinition: a valid definition', () => {
  it('applies the defaults and converts durations to milliseconds', () => {
    const result = validateJobDefinition(valid, '/abs/jobs/report.ts', 'jobs/report.ts');
    assert.ok(result.ok);
    const { job } = result;
    assert.equal(job.name, 'report');
    assert.equal(job.file, '/abs/jobs/report.ts');
    assert.deepEqual(job.trigger, { kind: 'cron', expression: '0 3 * * *' });
    assert.equal(job.timezone, 'UTC');
    assert.equal(job.queue, 'leasebeat');
    assert.equal(job.concurrency, 1);
    assert.equal(job.overlap, 'allow');
    assert.deepEqual(job.catchup, { windowMs: 300_000, mode: 'latest', max: 10 });
    assert.deepEqual(job.catchup, JOB_DEFAULTS.catchup);
    assert.equal(job.maxJitterMs, 0);
    assert.equal(job.paused, false);
    assert.equal(job.startAt, undefined);
    assert.equal(job.endAt, undefined);
    assert.deepEqual(job.jobOptions, {});
    assert.equal(job.handler, handler);
  });

  it('keeps every field it was given, in BullMQ shapes', () => {
    const flow = () => ({ name: 'parent' });
    const result = validateJobDefinition(
      {
        name: 'etl.v2_daily-1',
        every: '1h30m',
        data: { tenants: ['a', 'b'], limit: 3, nested: { ok: true, none: null } },
        handler,
        flow,
        queue: 'etl',
        concurrency: 4,
        attempts: 5,
        backoff: { type: 'exponential', delay: 2000 },
        removeOnComplete: { age: 3600, count: 10 },
        removeOnFail: 50,
        priority: 7,
        overlap: 'bufferOne',
        catchup: { window: '2h', mode: 'all', max: 3 },
        jitter: 15_000,
        paused: true,
        startAt: '2026-01-01T00:00:00Z',
        endAt: new Date('2027-01-01T00:00:00Z'),
      },
      '/abs/jobs/etl.ts',
    );
    assert.ok(result.ok, result.ok ? '' : result.errors.join('\n'));
    const { job } = result;
    assert.deepEqual(job.trigger, { kind: 'every', everyMs: 5_400_000 });
    assert.deepEqual(job.data, { tenants: ['a', 'b'], limit: 3, nested: { ok: true, none: null } });
    assert.equal(job.flow, flow);
    assert.equal(job.queue, 'etl');
    assert.equal(job.concurrency, 4);
    assert.deepEqual(job.jobOptions, {
      attempts: 5,
      backoff: { type: 'exponential', delay: 2000 },
      removeOnComplete: { age: 3600, count: 10 },
      removeOnFail: 50,
      priority: 7,
    });
    assert.equal(job.overlap, 'bufferOne');
    assert.deepEqual(job.catchup, { windowMs: 7_200_000, mode: 'all', max: 3 });
    assert.equal(job.maxJitterMs, 15_000);
    assert.equal(job.paused, true);
    assert.equal(job.startAt, Date.UTC(2026, 0, 1));
    assert.equal(job.endAt, Date.UTC(2027, 0, 1));
  });

  it('accepts 6-field crons, shortcuts and H fields', () => {
    for (const schedule of ['*/10 * * * * *', '@daily', '@weekdays', 'H H * * *', '0 0 L * *', '0 9 * * MON-FRI', '0 0 * * 5#3']) {
      assert.deepEqual(errorsOf({ ...valid, schedule }), [], schedule);
    }
  });

  it('defineJob returns its argument', () => {
    const definition = { name: 'x', every: '1m', handler };
    assert.equal(defineJob(definition), definition);
  });

  it('types: a definition needs a handler or a flow, and exactly one of schedule and every', () => {
    // These lines are checked by `tsc`; at run time defineJob accepts anything and the schema rejects it.
    // @ts-expect-error -- no handler and no flow
    defineJob({ name: 'x', every: '1m' });
    // @ts-expect-error -- schedule and every exclude each other
    defineJob({ name: 'x', every: '1m', schedule: '* * * * *', handler });
    // @ts-expect-error -- a misspelt field
    defineJob({ name: 'x', shedule: '* * * * *', handler });
    defineJob({ name: 'x', every: 60_000, data: { n: 1 }, handler: (job, ctx) => job.data.data.n + ctx.data.n });
  });
});

describe('validateJobDefinition: errors name the file, the field and the fix', () => {
  it('maps cron-parser errors to the field they are about', () => {
    const cases: Array<[string, string]> = [
      ['61 * * * *', 'jobs/x.ts: schedule "61 * * * *": minute must be 0-59 (got 61)'],
      ['0 24 * * *', 'jobs/x.ts: schedule "0 24 * * *": hour must be 0-23 (got 24)'],
      ['0 0 32 * *', 'jobs/x.ts: schedule "0 0 32 * *": day of month must be 1-31 (got 32)'],
      ['0 0 * 13 *', 'jobs/x.ts: schedule "0 0 * 13 *": month must be 1-12 (got 13)'],
      ['0 0 * * 8', 'jobs/x.ts: schedule "0 0 * * 8": day of week must be 0-7 (got 8)'],
      ['60 * * * * *', 'jobs/x.ts: schedule "60 * * * * *": second must be 0-59 (got 60)'],
      ['0-70 * * * *', 'jobs/x.ts: schedule "0-70 * * * *": minute range 0-70 must stay within 0-59'],
      ['30-10 * * * *', 'jobs/x.ts: schedule "30-10 * * * *": minute range 30-10 runs backwards; put the smaller number first'],
      ['*/0 * * * *', 'jobs/x.ts: schedule "*/0 * * * *": minute step in "*/0" must be a positive number'],
      ['0 0 * FOO *', 'jobs/x.ts: schedule "0 0 * FOO *": month "foo" is not a month or weekday name (use e.g. JAN or MON)'],
      ['x * * * *', 'jobs/x.ts: schedule "x * * * *": minute "x" is not valid; use numbers, ranges (1-5), lists (1,3), steps (*/15) or *'],
      ['0 0 * * 1#6', 'jobs/x.ts: schedule "0 0 * * 1#6": day of week "1#6": the number after # must be 1-5 (1#2 is the second Monday)'],
      ['0 0 30 2 *', 'jobs/x.ts: schedule "0 0 30 2 *": day of month 30 never occurs in month 2, so it would never run'],
      ['* * *', 'jobs/x.ts: schedule "* * *": has 3 fields; use 5 (minute hour day-of-month month day-of-week) or 6 (second first)'],
      ['* * * * * * *', 'jobs/x.ts: schedule "* * * * * * *": has 7 fields; use 5 (minute hour day-of-month month day-of-week) or 6 (second first)'],
      ['', 'jobs/x.ts: schedule "": is empty; write 5 fields like "0 3 * * *" (03:00 every day)'],
      ['@reboot', 'jobs/x.ts: schedule "@reboot": unknown shortcut; use one of @yearly, @annually, @monthly, @weekly, @daily, @hourly, @minutely, @secondly, @weekdays, @weekends'],
    ];
    for (const [schedule, expected] of cases) assert.deepEqual(errorsOf({ ...valid, schedule }), [expected], schedule);
  });

  it('reports every bad cron field at once', () => {
    assert.deepEqual(errorsOf({ ...valid, schedule: '99 99 * * *' }), [
      'jobs/x.ts: schedule "99 99 * * *": minute must be 0-59 (got 99)',
      'jobs/x.ts: schedule "99 99 * * *": hour must be 0-23 (got 99)',
    ]);
  });

  it('rejects an unknown time zone and suggests the IANA form', () => {
    assert.deepEqual(errorsOf({ ...valid, timezone: 'Mars/Phobos' }), [
      'jobs/x.ts: timezone "Mars/Phobos": unknown time zone; use an IANA name like "Europe/Berlin"',
    ]);
    assert.deepEqual(errorsOf({ ...valid, timezone: 'Europe/Berln' }), [
      'jobs/x.ts: timezone "Europe/Berln": unknown time zone; use an IANA name like "Europe/Berlin" (did you mean "Europe/Berlin"?)',
    ]);
    assert.deepEqual(errorsOf({ ...valid, timezone: 'UTC+1' }).length, 1);
  });

  it('rejects names that cannot be part of a BullMQ job id, and says why', () => {
    for (const name of ['reports:daily', '-leading-dash', 'has space', '', 'x'.repeat(129)]) {
      const [error, ...rest] = errorsOf({ ...valid, name });
      assert.deepEqual(rest, []);
      assert.match(error!, /^jobs\/x\.ts: name ".*: may contain only letters, digits, "\.", "_" and "-"/, name);
      assert.match(error!, /BullMQ job ids and Redis keys, where ":" separates the parts$/);
    }
    assert.deepEqual(errorsOf({ ...valid, name: 'x'.repeat(128) }), []);
  });

  it('names unknown fields and suggests the likely one', () => {
    assert.deepEqual(errorsOf({ name: 'x', shedule: '* * * * *', handler }), [
      'jobs/x.ts: shedule: unknown field; did you mean "schedule"?',
    ]);
    assert.deepEqual(errorsOf({ ...valid, catchup: { windw: '1m' } }), ['jobs/x.ts: catchup.windw: unknown field; did you mean "window"?']);
    const [unrelated] = errorsOf({ ...valid, colour: 'blue' });
    assert.match(unrelated!, /^jobs\/x\.ts: colour: unknown field; known fields are name, schedule, every, timezone, /);
  });

  it('reads a definition with neither schedule nor every as a job type, and refuses the fields only ticks use', () => {
    const result = validateJobDefinition({ name: 'send-report', handler, queue: 'reports', attempts: 3 }, '/abs/jobs/x.ts', 'jobs/x.ts');
    assert.ok(result.ok);
    assert.deepEqual(result.job.trigger, { kind: 'none' });
    assert.equal(describeTrigger(result.job), 'job type');
    assert.deepEqual(errorsOf({ name: 'x', handler, timezone: 'Europe/Berlin', overlap: 'skip' }), [
      'jobs/x.ts: timezone "Europe/Berlin": only applies to a definition that ticks; set schedule (a cron expression like "0 3 * * *") or every (an interval like "5m"), or remove it to define a job type that runtime schedules run',
      'jobs/x.ts: overlap "skip": only applies to a definition that ticks; set schedule (a cron expression like "0 3 * * *") or every (an interval like "5m"), or remove it to define a job type that runtime schedules run',
    ]);
  });

  it('takes at most one of schedule and every, and requires a handler or a flow', () => {
    assert.deepEqual(errorsOf({ name: 'x', schedule: '* * * * *', every: '1m', handler }), [
      'jobs/x.ts: schedule/every: set either schedule (cron) or every (an interval), not both',
    ]);
    assert.deepEqual(errorsOf({ name: 'x', every: '1m' }), [
      'jobs/x.ts: handler: missing; export a handler(job, ctx) function, a flow({ tick, data }) function, or both',
    ]);
    assert.deepEqual(errorsOf({ name: 'x', every: '1m', handler: 'run' }), [
      'jobs/x.ts: handler "run": must be a function (job, ctx) => …',
    ]);
  });

  it('checks durations and explains that numbers are milliseconds', () => {
    assert.deepEqual(errorsOf({ name: 'x', every: 5, handler }), [
      'jobs/x.ts: every 5: must be at least 1s; numbers are milliseconds — did you mean "5s"?',
    ]);
    assert.deepEqual(errorsOf({ name: 'x', every: '5 minutes', handler }), [
      'jobs/x.ts: every "5 minutes": is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"',
    ]);
    assert.deepEqual(errorsOf({ ...valid, timeout: '500ms' }), ['jobs/x.ts: timeout "500ms": must be at least 1s']);
    assert.deepEqual(errorsOf({ ...valid, pauseOnFailure: 0 }), ['jobs/x.ts: pauseOnFailure 0: must be a positive integer: the failed runs in a row that pause the job, e.g. 3']);
    assert.deepEqual(errorsOf({ ...valid, timeout: '30d' }), ['jobs/x.ts: timeout "30d": must be at most 24d']);
    assert.deepEqual(errorsOf({ ...valid, timeout: 30 }), ['jobs/x.ts: timeout 30: must be at least 1s; numbers are milliseconds — did you mean "30s"?']);
    assert.deepEqual(errorsOf({ ...valid, timeoutGrace: 'soon' }), [
      'jobs/x.ts: timeoutGrace "soon": is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"',
    ]);
    assert.deepEqual(errorsOf({ ...valid, jitter: '-1s' }), [
      'jobs/x.ts: jitter "-1s": is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"',
    ]);
  });

  it('rejects a timezone on an every job, which would not apply', () => {
    assert.deepEqual(errorsOf({ name: 'x', every: '1d', timezone: 'Europe/Berlin', handler }), [
      'jobs/x.ts: timezone "Europe/Berlin": has no effect on every, which is aligned to the Unix epoch; for local times use a schedule like "0 0 * * *" with the timezone',
    ]);
  });

  it('checks options against what BullMQ accepts', () => {
    assert.deepEqual(
      errorsOf({
        ...valid,
        concurrency: 0,
        attempts: 1.5,
        backoff: { type: 'linear', delay: 100 },
        removeOnComplete: { age: -1 },
        priority: 3_000_000,
        overlap: 'replace',
        catchup: { mode: 'lastest', max: 0 },
        paused: 'yes',
        queue: 'a:b',
      }),
      [
        'jobs/x.ts: queue "a:b": must not contain ":" (BullMQ uses it to separate the parts of its Redis keys)',
        'jobs/x.ts: concurrency 0: must be a positive integer (runs at once on each instance), e.g. 2',
        'jobs/x.ts: attempts 1.5: must be a positive integer, e.g. 3',
        'jobs/x.ts: backoff {"type":"linear","delay":100}: must be milliseconds, or { type: "fixed" | "exponential", delay: milliseconds }',
        'jobs/x.ts: removeOnComplete {"age":-1}: must be true, false, a number of jobs to keep, or { age: seconds, count }',
        'jobs/x.ts: priority 3000000: must be an integer from 0 (none) through 1 (highest) to 2097152 (lowest)',
        'jobs/x.ts: overlap "replace": must be "allow", "skip", "bufferOne", "bufferAll", "cancelOther" or "terminateOther"',
        'jobs/x.ts: catchup.mode "lastest": must be "latest", "all" or "none"',
        'jobs/x.ts: catchup.max 0: must be an integer from 1 to 1000',
        'jobs/x.ts: paused "yes": must be true or false',
      ],
    );
  });

  it('bufferAll: bufferMax defaults to 10, is a whole number from 1 to 1000, and only goes with bufferAll', () => {
    assert.equal(scheduledJob({ ...valid, overlap: 'bufferAll' }).bufferMax, 10);
    assert.equal(scheduledJob({ ...valid, overlap: 'bufferAll', bufferMax: 3 }).bufferMax, 3);
    assert.equal(scheduledJob({ ...valid, overlap: 'bufferOne' }).bufferMax, 1, 'bufferOne holds one tick');
    assert.equal(scheduledJob(valid).bufferMax, 0);
    assert.equal(scheduledJob({ ...valid, overlap: 'cancelOther' }).bufferMax, 1, 'cancelOther holds the new tick until the cancelled run stopped');
    assert.equal(scheduledJob({ ...valid, overlap: 'terminateOther' }).bufferMax, 0);
    assert.deepEqual(errorsOf({ ...valid, overlap: 'bufferAll', bufferMax: 0 }), [
      'jobs/x.ts: bufferMax 0: must be an integer from 1 to 1000: the ticks that may wait behind an unfinished run, e.g. 10',
    ]);
    assert.deepEqual(errorsOf({ ...valid, overlap: 'bufferAll', bufferMax: 2.5 }), [
      'jobs/x.ts: bufferMax 2.5: must be an integer from 1 to 1000: the ticks that may wait behind an unfinished run, e.g. 10',
    ]);
    assert.deepEqual(errorsOf({ ...valid, overlap: 'bufferOne', bufferMax: 3 }), [
      'jobs/x.ts: bufferMax 3: only applies to overlap "bufferAll"; set overlap: "bufferAll" or remove bufferMax',
    ]);
  });

  it('requires JSON data and names the problem, not a JSON rendering of the value', () => {
    assert.deepEqual(errorsOf({ ...valid, data: { at: new Date(0) } }), [
      'jobs/x.ts: data: must be JSON-serialisable: data.at is a Date; use plain objects, arrays, strings, numbers, booleans and null',
    ]);
    const cyclic: Record<string, unknown> = { list: [1, 2] };
    cyclic.self = cyclic;
    assert.deepEqual(errorsOf({ ...valid, data: cyclic }), ['jobs/x.ts: data: must be JSON-serialisable: data.self refers back to itself']);
    // JSON shows NaN as null, and cannot show a BigInt at all: neither may appear as the value.
    assert.deepEqual(errorsOf({ ...valid, data: { x: NaN } }), ['jobs/x.ts: data: must be JSON-serialisable: data.x is NaN, which JSON turns into null']);
    assert.deepEqual(errorsOf({ ...valid, data: { n: 10n } }), [
      'jobs/x.ts: data: must be JSON-serialisable: data.n is a BigInt (10n), which JSON cannot encode; use a number or a string',
    ]);
    assert.match(errorsOf({ ...valid, data: [1, () => 2] })[0]!, /data\[1\] is a function$/);
    assert.match(errorsOf({ ...valid, data: { a: undefined } })[0]!, /data\.a is undefined$/);
    // A hole in an array is undefined to JSON too (it writes null): named, not a TypeError of the check.
    // eslint-disable-next-line no-sparse-arrays
    assert.match(errorsOf({ ...valid, data: { list: [1, , 3] } })[0]!, /data\.list\[1\] is undefined$/);
  });

  it('a BigInt elsewhere is shown as written, not as "an object that refers back to itself"', () => {
    assert.deepEqual(errorsOf({ ...valid, removeOnComplete: { age: 5n } }), [
      'jobs/x.ts: removeOnComplete {"age":5n}: must be true, false, a number of jobs to keep, or { age: seconds, count }',
    ]);
  });

  it('names W as unsupported in a day of month, and lists the L and # forms that work', () => {
    assert.deepEqual(errorsOf({ ...valid, schedule: '0 0 15W * *' }), [
      'jobs/x.ts: schedule "0 0 15W * *": day of month "15W": W (nearest weekday) is not supported; use numbers, ranges (1-5), lists (1,15), ' +
        'steps (*/2) or L (the last day of the month); day of week also takes 5L (the last Friday) and 1#2 (the second Monday)',
    ]);
    assert.deepEqual(errorsOf({ ...valid, schedule: '0 0 * * WED' }), []);
    // The generic hint names the day fields' own forms too.
    assert.deepEqual(errorsOf({ ...valid, schedule: '0 0 * * 5X' }), [
      'jobs/x.ts: schedule "0 0 * * 5X": day of week "5X" is not valid; use numbers, ranges (1-5), lists (1,3), steps (*/15), *, 5L (the last Friday) or 1#2 (the second Monday)',
    ]);
    assert.deepEqual(errorsOf({ ...valid, schedule: '0 0 1X * *' }), [
      'jobs/x.ts: schedule "0 0 1X * *": day of month "1X" is not valid; use numbers, ranges (1-5), lists (1,3), steps (*/15), * or L (the last day of the month)',
    ]);
  });

  it('warns about an endAt in the past and a "?" outside the day fields, and keeps the job', () => {
    const now = Date.parse('2026-06-01T00:00:00Z');
    const result = validateJobDefinition({ ...valid, schedule: '? * * * *', endAt: '2026-01-01' }, '/abs/jobs/x.ts', 'jobs/x.ts', now);
    assert.ok(result.ok);
    assert.deepEqual(result.warnings, [
      'jobs/x.ts: endAt 2026-01-01T00:00:00.000Z: is in the past, so the job never runs again; remove endAt or move it forward',
      'jobs/x.ts: schedule "? * * * *": "?" in the minute field is read as * (every minute); write * if that is meant',
    ]);
    const quiet = validateJobDefinition({ ...valid, schedule: '0 0 ? * MON', endAt: '2027-01-01' }, '/abs/jobs/x.ts', 'jobs/x.ts', now);
    assert.ok(quiet.ok);
    assert.deepEqual(quiet.warnings, []);
  });

  it('requires dates with an explicit zone, and endAt after startAt', () => {
    assert.deepEqual(errorsOf({ ...valid, startAt: '2026-01-01T09:00' }), [
      'jobs/x.ts: startAt "2026-01-01T09:00": must be a Date or an ISO 8601 string like "2026-01-01" or "2026-01-01T09:00:00+01:00"; a time needs "Z" or an offset so that every instance reads it the same',
    ]);
    assert.deepEqual(errorsOf({ ...valid, startAt: '2026-02-01', endAt: '2026-01-01T00:00:00+01:00' }), [
      'jobs/x.ts: endAt "2026-01-01T00:00:00+01:00": must be later than startAt',
    ]);
    assert.deepEqual(errorsOf({ ...valid, startAt: new Date(NaN) }).length, 1);
  });

  it('rejects a default export that is not a definition object', () => {
    for (const value of ['nope', 42, null, [valid]]) {
      const [error, ...rest] = errorsOf(value);
      assert.deepEqual(rest, []);
      assert.match(error!, /^jobs\/x\.ts: default export .*: must be a job definition object: export default defineJob\(/);
    }
    assert.deepEqual(errorsOf(() => valid), [
      'jobs/x.ts: default export (a function): must be a job definition object: export default defineJob({ name, schedule, handler })',
    ]);
  });

  it('collects every problem of a file, not just the first', () => {
    const errors = errorsOf({ name: 'a:b', schedule: '61 * * * *', timezone: 'Nowhere/Land', concurrency: -1, shedule: 'x' });
    assert.deepEqual(
      errors.map((error) => error.split(':')[1]!.trim().split(' ')[0]),
      ['name', 'schedule', 'timezone', 'concurrency', 'shedule', 'handler'],
    );
  });
});

describe('durations', () => {
  it('parses milliseconds and unit strings', () => {
    assert.equal(parseDuration(1500), 1500);
    assert.equal(parseDuration('250ms'), 250);
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('5m'), 300_000);
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('1h 30m 15s'), 5_415_000);
    assert.equal(parseDuration('1.5h'), 5_400_000);
    assert.equal(parseDuration('2d'), 172_800_000);
    for (const bad of ['', '5', 'm', '5 minutes', '-1s', '1x', 1.5, -1, NaN, Infinity, null, {}]) {
      assert.equal(parseDuration(bad), undefined, JSON.stringify(bad));
    }
  });

  it('formats milliseconds compactly', () => {
    assert.equal(formatDuration(0), '0s');
    assert.equal(formatDuration(1000), '1s');
    assert.equal(formatDuration(5_415_250), '1h30m15s250ms');
    assert.equal(formatDuration(86_400_000), '1d');
  });
});

describe('describeTrigger', () => {
  it('shows a cron schedule as written and an interval as `every <duration>`', () => {
    assert.equal(describeTrigger(scheduledJob({ schedule: '30 2 * * *', timezone: 'Europe/Berlin' })), '30 2 * * *');
    assert.equal(describeTrigger(scheduledJob({ every: '90m' })), 'every 1h30m');
    assert.equal(describeTrigger(scheduledJob({ every: 45_000 })), 'every 45s');
  });
});
