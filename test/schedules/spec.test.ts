import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { nextTicks } from '../../src/scheduling/plan.js';
import { checkScheduleSpec, compileSchedule, MAX_LIMIT } from '../../src/schedules/spec.js';
import { scheduledJob } from '../support/scheduled-job.js';

const handler = (): undefined => undefined;
const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
/** Job types as the loader gives them (no schedule, no every), beside one scheduled file job. */
const sendReport: ScheduledJob = { ...scheduledJob({ name: 'send-report', handler, queue: 'reports', attempts: 3, data: { format: 'pdf' } }), trigger: { kind: 'none' } };
const types = new Map<string, ScheduledJob>([
  ['send-report', sendReport],
  ['nightly', scheduledJob({ name: 'nightly', schedule: '0 3 * * *', handler })],
]);

function errorsOf(id: string, spec: unknown): string[] {
  const result = checkScheduleSpec(id, spec, types, NOW);
  return result.ok ? [] : result.errors;
}

describe('checkScheduleSpec: a valid spec', () => {
  it("compiles to a job named by its id that does its job type's work on its own ticks", () => {
    const result = checkScheduleSpec('tenant-42.daily', { job: 'send-report', schedule: '0 9 * * *', timezone: 'Europe/Berlin', data: { tenant: 42 }, overlap: 'skip' }, types, NOW);
    assert.ok(result.ok);
    const { job, spec } = result;
    assert.equal(job.name, 'tenant-42.daily');
    assert.equal(job.type, 'send-report');
    assert.deepEqual(job.trigger, { kind: 'cron', expression: '0 9 * * *' });
    assert.equal(job.timezone, 'Europe/Berlin');
    assert.equal(job.handler, handler);
    assert.equal(job.queue, 'reports');
    assert.deepEqual(job.jobOptions, { attempts: 3 });
    assert.deepEqual(job.data, { tenant: 42 });
    assert.equal(job.overlap, 'skip');
    assert.deepEqual(spec, { job: 'send-report', schedule: '0 9 * * *', timezone: 'Europe/Berlin', data: { tenant: 42 }, overlap: 'skip' });
  });

  it("takes the job type's data when the spec has none", () => {
    const result = checkScheduleSpec('a', { job: 'send-report', every: '10m' }, types, NOW);
    assert.ok(result.ok);
    assert.deepEqual(result.job.data, { format: 'pdf' });
  });

  it('at: one tick at that instant, stored as an ISO string', () => {
    const at = new Date(NOW + 60_000);
    const result = checkScheduleSpec('once', { job: 'send-report', at }, types, NOW);
    assert.ok(result.ok);
    assert.equal(result.spec.at, at.toISOString());
    assert.deepEqual(nextTicks(result.job, NOW, 3), [at.getTime()]);
    assert.deepEqual(nextTicks(result.job, at.getTime(), 1), []);
  });

  it('limit: the schedule ends after that many ticks from the write, fixed in the stored spec', () => {
    const result = checkScheduleSpec('three', { job: 'send-report', every: '1h', limit: 3 }, types, NOW);
    assert.ok(result.ok);
    const hour = 3_600_000;
    assert.equal(result.spec.limitEndsAt, NOW + 3 * hour);
    assert.deepEqual(nextTicks(result.job, NOW, 5), [NOW + hour, NOW + 2 * hour, NOW + 3 * hour]);
    // Compiled again later (another instance, a restart), it ends at the same tick.
    const again = compileSchedule('three', result.spec, sendReport);
    assert.ok(again.ok);
    assert.deepEqual(nextTicks(again.job, NOW + hour, 5), [NOW + 2 * hour, NOW + 3 * hour]);
  });

  it('limit 1 with startAt on a tick: exactly that tick', () => {
    const startAt = new Date(NOW + 3_600_000).toISOString();
    const result = checkScheduleSpec('one', { job: 'send-report', every: '1h', startAt, limit: 1 }, types, NOW);
    assert.ok(result.ok);
    assert.deepEqual(nextTicks(result.job, NOW, 3), [NOW + 3_600_000]);
  });

  it('a schedule owes no tick from before it was created, and an interval keeps its alignment', () => {
    const result = compileSchedule('late', { job: 'send-report', every: '1s' }, sendReport, NOW + 500);
    assert.ok(result.ok);
    assert.deepEqual(nextTicks(result.job, NOW - 10_000, 2), [NOW + 1_000, NOW + 2_000]);
  });

  it('an orphaned spec (job type gone) still compiles, with no handler and no flow', () => {
    const result = compileSchedule('left', { job: 'gone', every: '5m' }, undefined);
    assert.ok(result.ok);
    assert.equal(result.job.handler, undefined);
    assert.equal(result.job.flow, undefined);
    assert.equal(result.job.type, 'gone');
  });
});

describe('checkScheduleSpec: bad input is one line naming the field and the fix', () => {
  it('an unknown job type, with a suggestion and the known types', () => {
    assert.deepEqual(errorsOf('a', { job: 'send-reprot', every: '5m' }), [
      'schedule "a": job "send-reprot": unknown job type; did you mean "send-report"? job types are send-report',
    ]);
  });

  it('a scheduled file job is not a job type', () => {
    assert.deepEqual(errorsOf('a', { job: 'nightly', every: '5m' }), [
      'schedule "a": job "nightly": is a scheduled file job, not a job type; name a definition in jobs/ without schedule or every',
    ]);
  });

  it('a bad cron and an unknown time zone, in the file definitions\' words', () => {
    const [cron] = errorsOf('a', { job: 'send-report', schedule: '61 * * * *' });
    assert.match(cron!, /^schedule "a": schedule "61 \* \* \* \*": /);
    assert.deepEqual(errorsOf('a', { job: 'send-report', schedule: '0 9 * * *', timezone: 'Europe/Berln' }), [
      'schedule "a": timezone "Europe/Berln": unknown time zone; use an IANA name like "Europe/Berlin" (did you mean "Europe/Berlin"?)',
    ]);
  });

  it('at in the past, and at with fields a one-shot run has no use for', () => {
    assert.deepEqual(errorsOf('a', { job: 'send-report', at: new Date(NOW - 1).toISOString() }), [
      `schedule "a": at "${new Date(NOW - 1).toISOString()}": is in the past; give a future instant, or trigger(id) to run now`,
    ]);
    assert.deepEqual(errorsOf('a', { job: 'send-report', at: NOW + 1000, every: '5m', jitter: '1s' }), [
      'schedule "a": at: is a one-shot run; set at alone, without every',
      'schedule "a": jitter: has no effect on a one-shot schedule (at); remove it',
    ]);
    assert.deepEqual(errorsOf('a', { job: 'send-report', at: '2027-01-01T00:00:00' }), [
      'schedule "a": at "2027-01-01T00:00:00": must be a Date, epoch ms, or an ISO 8601 string with "Z" or an offset',
    ]);
  });

  it('limit below 1 or above the bound', () => {
    for (const limit of [0, -1, 1.5, MAX_LIMIT + 1]) {
      assert.deepEqual(errorsOf('a', { job: 'send-report', every: '5m', limit }), [
        `schedule "a": limit ${limit}: must be a whole number from 1 to ${MAX_LIMIT} (the ticks the schedule has left)`,
      ]);
    }
  });

  it('an id outside the documented characters', () => {
    for (const id of ['tenant:42', '-x', 'has space', '', 'x'.repeat(129)]) {
      const [error, ...rest] = errorsOf(id, { job: 'send-report', every: '5m' });
      assert.deepEqual(rest, []);
      assert.match(error!, /: id: may contain only letters, digits, "\.", "_" and "-"/);
    }
  });

  it('a spec over the size bound', () => {
    assert.deepEqual(errorsOf('a', { job: 'send-report', every: '5m', data: { blob: 'x'.repeat(20_000) } }), [
      'schedule "a": data: the spec is over 16 KiB as JSON; keep large payloads elsewhere and pass a reference in data',
    ]);
  });

  it('no timing, unknown fields, and a definition field a schedule cannot set', () => {
    assert.deepEqual(errorsOf('a', { job: 'send-report' }), [
      'schedule "a": schedule: missing; set schedule (a cron expression like "0 3 * * *"), every (an interval like "5m") or at (an instant)',
    ]);
    assert.deepEqual(errorsOf('a', { job: 'send-report', every: '5m', timezon: 'UTC', queue: 'x' }), [
      'schedule "a": timezon: unknown field; did you mean "timezone"?',
      'schedule "a": queue: unknown field; known fields are job, schedule, every, at, timezone, data, overlap, bufferMax, catchup, jitter, startAt, endAt, limit, paused, note',
    ]);
    assert.deepEqual(errorsOf('a', 'every 5m'), ['schedule "a": spec: must be an object like { "job": "send-report", "schedule": "0 9 * * *" }']);
  });
});

/**
 * Bulk writes repeat a few shapes (a job type with the same timing fields, other data): the full check's
 * result for a shape is reused for the next spec of it (CompiledShapes). What it gives and refuses must
 * be what the full check gives and refuses.
 */
describe('checkScheduleSpec: a spec of a shape checked before', () => {
  it('compiles to what the full check makes of it, with its own id and data', () => {
    const shapes = [
      { job: 'send-report', every: '1h' },
      { job: 'send-report', every: 3_600_000, overlap: 'skip', jitter: '1m', paused: true },
      { job: 'send-report', every: '15m', startAt: '2027-01-01T00:00:00Z', endAt: '2027-02-01', note: 'per tenant' },
      { job: 'send-report', schedule: '0 9 * * *', timezone: 'Europe/Berlin', overlap: 'bufferAll', bufferMax: 3 },
    ];
    for (const shape of shapes) {
      for (const [id, data] of [['first', { tenant: 1 }], ['second', { tenant: 2, tags: ['a', null, true, 1.5] }], ['third', undefined]] as const) {
        const spec = data === undefined ? shape : { ...shape, data };
        const result = checkScheduleSpec(id, spec, types, NOW);
        assert.ok(result.ok, JSON.stringify(spec));
        const full = compileSchedule(id, result.spec, sendReport);
        assert.ok(full.ok);
        assert.deepEqual(result.job, full.job, JSON.stringify(spec));
        assert.equal(result.job.name, id);
        assert.deepEqual(result.job.data, data ?? sendReport.data);
        assert.deepEqual(result.spec, { ...shape, ...(data === undefined ? {} : { data }) });
        assert.equal(result.json, JSON.stringify(result.spec));
      }
    }
  });

  it('bad values of that shape are refused in the full check\'s words', () => {
    assert.ok(checkScheduleSpec('good', { job: 'send-report', every: '1h', data: { tenant: 1 } }, types, NOW).ok);
    const cyclic: Record<string, unknown> = { tenant: 1 };
    cyclic.self = cyclic;
    class Tenant {
      id = 1;
    }
    const refusals: Array<[unknown, string]> = [
      [{ job: 'send-report', every: '500ms' }, 'every "500ms": must be at least 1s'],
      [{ job: 'send-report', every: 500 }, 'every 500: must be at least 1s; numbers are milliseconds — did you mean "500s"?'],
      [{ job: 'send-report', every: 'an hour' }, 'every "an hour": is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"'],
      [{ job: 'send-report', every: NaN }, 'every null: is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"'],
      [{ job: 'send-report', every: Infinity }, 'every null: is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"'],
      [{ job: 'send-report', every: { ms: 5 } }, 'every {"ms":5}: is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"'],
      [{ job: 'send-report', every: '1h', schedule: '0 * * * *' }, 'schedule/every: set either schedule (cron) or every (an interval), not both'],
      [{ job: 'send-report', every: '1h', timezone: 'Europe/Berlin' }, 'timezone "Europe/Berlin": has no effect on every, which is aligned to the Unix epoch; for local times use a schedule like "0 0 * * *" with the timezone'],
      [{ job: 'send-report', every: '1h', paused: 'yes' }, 'paused "yes": must be true or false'],
      [{ job: 'send-report', every: '1h', data: { n: NaN } }, 'data: must be JSON-serialisable: data.n is NaN, which JSON turns into null'],
      [{ job: 'send-report', every: '1h', data: { when: new Date(0) } }, 'data: must be JSON-serialisable: data.when is a Date; use plain objects, arrays, strings, numbers, booleans and null'],
      [{ job: 'send-report', every: '1h', data: new Tenant() }, 'data: must be JSON-serialisable: data is a Tenant; use plain objects, arrays, strings, numbers, booleans and null'],
      [{ job: 'send-report', every: '1h', data: cyclic }, 'data: must be JSON-serialisable: data.self refers back to itself'],
      [{ job: 'send-report', every: '1h', data: { n: 5n } }, 'data: must be JSON-serialisable: data.n is a BigInt (5n), which JSON cannot encode; use a number or a string'],
      [{ job: 'send-report', every: '1h', data: { n: undefined } }, 'data: must be JSON-serialisable: data.n is undefined'],
      [{ job: 'send-report', every: '1h', evry: '2h' }, 'evry: unknown field; did you mean "every"?'],
      [{ job: 'send-report', every: '1h', note: 5 }, 'note: must be text of at most 500 characters'],
      [{ job: 'send-reprt', every: '1h' }, 'job "send-reprt": unknown job type; did you mean "send-report"? job types are send-report'],
      [{ job: 5, every: '1h' }, 'job: missing; name the job type (a definition in jobs/ without schedule or every) that runs the ticks'],
      [{ job: 'send-report', every: '1h', data: { blob: 'x'.repeat(20_000) } }, 'data: the spec is over 16 KiB as JSON; keep large payloads elsewhere and pass a reference in data'],
      [[{ job: 'send-report', every: '1h' }], 'spec: must be an object like { "job": "send-report", "schedule": "0 9 * * *" }'],
      [Object.assign(new Tenant(), { job: 'send-report', every: '1h' }), 'spec: must be an object like { "job": "send-report", "schedule": "0 9 * * *" }'],
      [{ job: 'send-report', every: '1h', [Symbol('tenant')]: 1 }, 'spec: must be an object like { "job": "send-report", "schedule": "0 9 * * *" }'],
    ];
    for (const [spec, error] of refusals) {
      // Twice: the second meets whatever the first left behind.
      assert.deepEqual(errorsOf('a', spec), [`schedule "a": ${error}`]);
      assert.deepEqual(errorsOf('a', spec), [`schedule "a": ${error}`]);
    }
    assert.match(errorsOf('a:b', { job: 'send-report', every: '1h', data: { tenant: 1 } })[0]!, /^schedule "a:b": id: may contain only letters/);
  });

  it('an object without a prototype is a spec like any other', () => {
    const spec = Object.assign(Object.create(null) as object, { job: 'send-report', every: '1h', data: { tenant: 1 } });
    const result = checkScheduleSpec('bare', spec, types, NOW);
    assert.ok(result.ok);
    assert.deepEqual(result.spec, { job: 'send-report', every: '1h', data: { tenant: 1 } });
  });

  it('a job type loaded again is compiled against afresh', () => {
    const reloaded = new Map(types).set('send-report', { ...sendReport, queue: 'reports-2' });
    for (const [id, jobTypes, queue] of [['before', types, 'reports'], ['after', reloaded, 'reports-2']] as const) {
      const result = checkScheduleSpec(id, { job: 'send-report', every: '1h' }, jobTypes, NOW);
      assert.ok(result.ok);
      assert.equal(result.job.queue, queue);
    }
  });
});
