import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { createAdmin, ScheduleError, type Admin, type ScheduleSpec, type ScheduleView } from '../../src/index.js';
import { MAX_SPEC_BYTES } from '../../src/schedules/spec.js';
import { isOneLine, keyspaceChanges, keyspaceSnapshot, scheduleFootprint } from '../support/keyspace.js';
import { useRedis } from '../support/redis-server.js';
import { SCHEDULE_JOBS } from '../support/schedule-instance.js';

/** An existing schedule that every refused edit tries to change. */
const KEPT = 'kept';
const KEPT_SPEC: ScheduleSpec = { job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Berlin', data: { tenant: 1 } };
/** A stored interval: its shape is compiled before the bad intervals and data are tried. */
const EVERY_KEPT = 'every-kept';

interface BadInput {
  /** What is wrong, as the `it` says it. */
  what: string;
  id: string;
  spec: () => ScheduleSpec;
  /** The field the line names, right after `schedule "<id>": `, and the fix it gives. */
  field: RegExp;
  fix: RegExp;
  /** Whether the spec alone is wrong, so that an edit of {@link KEPT} with it is refused too. */
  edit: boolean;
}

const ID_RULE = /may contain only letters, digits, "\.", "_" and "-", must start with a letter or digit and be at most 128 long/;

/** Issue 21's bad inputs, and what the one line refusing each must say. */
const BAD_INPUTS: BadInput[] = [
  { what: 'an unknown job type', id: 'bad-type', spec: () => ({ job: 'wrok', every: '1h' }), field: /job "wrok": unknown job type/, fix: /did you mean "work"\? job types are report, work$/, edit: true },
  { what: 'a file job named as the job type', id: 'bad-file-type', spec: () => ({ job: 'nightly', every: '1h' }), field: /job "nightly": /, fix: /name a definition in jobs\/ without schedule or every$/, edit: true },
  { what: 'a bad cron', id: 'bad-cron', spec: () => ({ job: 'work', schedule: '61 * * * *' }), field: /schedule "61 \* \* \* \*": /, fix: /minute must be 0-59/, edit: true },
  { what: 'a cron with too many fields', id: 'bad-cron-fields', spec: () => ({ job: 'work', schedule: '* * * * * * *' }), field: /schedule "\* \* \* \* \* \* \*": /, fix: /has 7 fields; use 5 \(minute hour day-of-month month day-of-week\) or 6 \(second first\)$/, edit: true },
  {
    what: 'an unknown time zone',
    id: 'bad-zone',
    spec: () => ({ job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Berlln' }),
    field: /timezone "Europe\/Berlln": unknown time zone/,
    fix: /use an IANA name like "Europe\/Berlin" \(did you mean "Europe\/Berlin"\?\)$/,
    edit: true,
  },
  // Intervals and data beside a stored interval of the same shape (EVERY_KEPT): refused in the full check's words.
  { what: 'an interval under a second', id: 'bad-every-short', spec: () => ({ job: 'work', every: '500ms' }), field: /every "500ms": /, fix: /must be at least 1s$/, edit: true },
  {
    what: 'an interval in bare milliseconds under a second',
    id: 'bad-every-ms',
    spec: () => ({ job: 'work', every: 500 }),
    field: /every 500: /,
    fix: /must be at least 1s; numbers are milliseconds — did you mean "500s"\?$/,
    edit: true,
  },
  { what: 'an interval that is no duration', id: 'bad-every-text', spec: () => ({ job: 'work', every: 'an hour' }), field: /every "an hour": /, fix: /is not a duration; use milliseconds or a string like "30s", "5m" or "1h30m"$/, edit: true },
  { what: 'an interval that is no number', id: 'bad-every-nan', spec: () => ({ job: 'work', every: NaN }), field: /every null: /, fix: /is not a duration/, edit: true },
  { what: 'data JSON would change', id: 'bad-every-data', spec: () => ({ job: 'work', every: '1h', data: { tenant: NaN } }), field: /data: must be JSON-serialisable: /, fix: /data\.tenant is NaN, which JSON turns into null$/, edit: true },
  {
    what: 'data of a class',
    id: 'bad-every-class',
    spec: () => ({ job: 'work', every: '1h', data: new Map([['tenant', 1]]) }),
    field: /data: must be JSON-serialisable: /,
    fix: /data is a Map; use plain objects, arrays, strings, numbers, booleans and null$/,
    edit: true,
  },
  { what: '`at` in the past', id: 'bad-at', spec: () => ({ job: 'work', at: Date.now() - 60_000 }), field: /at "\d{4}-\d\d-\d\dT[\d:.]+Z": is in the past/, fix: /give a future instant, or trigger\(id\) to run now$/, edit: true },
  { what: 'limit 0', id: 'bad-limit-0', spec: () => ({ job: 'work', every: '1h', limit: 0 }), field: /limit 0: /, fix: /must be a whole number from 1 to 10000/, edit: true },
  { what: 'limit -1', id: 'bad-limit-negative', spec: () => ({ job: 'work', every: '1h', limit: -1 }), field: /limit -1: /, fix: /must be a whole number from 1 to 10000/, edit: true },
  { what: 'an id with ":"', id: 'tenant:1', spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  { what: 'an id with a space', id: 'tenant 1', spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  { what: 'an id with "/"', id: 'tenant/1', spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  { what: 'an id starting with "-"', id: '-tenant', spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  { what: 'an id with a line break', id: 'tenant\n1', spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  { what: 'an id over 128 characters', id: 'x'.repeat(129), spec: () => ({ job: 'work', every: '1h' }), field: /id: /, fix: ID_RULE, edit: false },
  {
    what: 'a spec over the size bound',
    id: 'bad-size',
    spec: () => ({ job: 'work', every: '1h', data: { blob: 'x'.repeat(MAX_SPEC_BYTES) } }),
    field: /data: the spec is over 16 KiB as JSON/,
    fix: /keep large payloads elsewhere and pass a reference in data$/,
    edit: true,
  },
  {
    // 9 Ki characters, 18 KiB as UTF-8: the bound is on bytes, as it says, not on UTF-16 code units.
    what: 'a spec over the size bound in multi-byte characters',
    id: 'bad-size-utf8',
    spec: () => ({ job: 'work', every: '1h', data: { blob: 'é'.repeat(9 * 1024) } }),
    field: /data: the spec is over 16 KiB as JSON/,
    fix: /keep large payloads elsewhere and pass a reference in data$/,
    edit: true,
  },
  // Names the client chose end up in the line: a line break in them must not split it.
  { what: 'an unknown field with a line break in its name', id: 'bad-field', spec: () => ({ job: 'work', every: '1h', 'no\nte': 'x' }) as ScheduleSpec, field: /no\\nte: unknown field/, fix: /did you mean "note"\?$/, edit: true },
  { what: 'an unknown job type with a line break', id: 'bad-type-break', spec: () => ({ job: 'wo\nrk', every: '1h' }), field: /job "wo\\nrk": unknown job type/, fix: /job types are report, work$/, edit: true },
  {
    what: 'an unknown catch-up field with a line break in its name',
    id: 'bad-catchup',
    spec: () => ({ job: 'work', every: '1h', catchup: { 'win\ndow': '5m' } }) as ScheduleSpec,
    field: /catchup\.win\\ndow: unknown field/,
    fix: /did you mean "window"\?$/,
    edit: true,
  },
];

function escaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Asserts `error` is the one-line `invalid` refusal `bad` calls for, of schedule `id`. */
function assertRefusal(error: unknown, id: string, bad: BadInput): true {
  assert.ok(error instanceof ScheduleError, `not a ScheduleError: ${String(error)}`);
  assert.equal(error.code, 'invalid');
  assert.equal(error.errors.length, 1, error.errors.join('\n'));
  assert.equal(error.message, error.errors[0]);
  assert.ok(isOneLine(error.message), `more than one line: ${JSON.stringify(error.message)}`);
  assert.match(error.message, new RegExp(`^schedule ${escaped(JSON.stringify(id))}: ${bad.field.source}`));
  assert.match(error.message, bad.fix);
  return true;
}

/**
 * Issue 21: each bad input is refused through the real `createAdmin().schedules.upsert` with one line
 * naming the field and the fix, and nothing is written: no key of the server changes. No instance runs,
 * so the keyspace holds still between the snapshots.
 */
describe('schedules: bad input is refused in one line and writes nothing (real Redis)', () => {
  const redis = useRedis();
  let admin: Admin;
  let kept: ScheduleView;

  before(async () => {
    admin = createAdmin({ connection: redis.server.url, jobsDir: SCHEDULE_JOBS, who: 'test@ci', timeoutMs: 10_000 });
    const empty = await keyspaceSnapshot(redis.client);
    await admin.schedules.upsert(KEPT, KEPT_SPEC);
    await admin.schedules.upsert(EVERY_KEPT, { job: 'work', every: '1h', data: { tenant: 2 } });
    kept = (await admin.schedules.get(KEPT))!;
    assert.equal(kept.version, 1);
    // The snapshot sees a write: the record, the indexes, the feed and the history.
    assert.ok(keyspaceChanges(empty, await keyspaceSnapshot(redis.client)).length >= 4);
  });
  redis.beforeClose(() => admin.close());

  for (const bad of BAD_INPUTS) {
    it(`${bad.what}: refused, nothing written`, async () => {
      const before = await keyspaceSnapshot(redis.client);
      const [size, footprint] = [await redis.client.dbsize(), await scheduleFootprint(redis.client, bad.id)];
      await assert.rejects(admin.schedules.upsert(bad.id, bad.spec()), (error) => assertRefusal(error, bad.id, bad));
      // `check` refuses it the same way.
      await assert.rejects(admin.schedules.check(bad.id, bad.spec()), (error) => assertRefusal(error, bad.id, bad));
      assert.deepEqual(keyspaceChanges(before, await keyspaceSnapshot(redis.client)), [], 'no key changed');
      assert.equal(await redis.client.dbsize(), size);
      assert.deepEqual(await scheduleFootprint(redis.client, bad.id), footprint);
      assert.equal(footprint.record, null);
      assert.equal(await admin.schedules.get(bad.id), undefined);
      assert.equal((await admin.schedules.list({ search: bad.id })).schedules.length, 0);

      if (!bad.edit) return;
      // A refused edit of a stored schedule: its version and spec stay as they were.
      await assert.rejects(admin.schedules.upsert(KEPT, bad.spec()), (error) => assertRefusal(error, KEPT, bad));
      await assert.rejects(admin.schedules.upsert(KEPT, bad.spec(), { expectedVersion: kept.version }), (error) => assertRefusal(error, KEPT, bad));
      assert.deepEqual(keyspaceChanges(before, await keyspaceSnapshot(redis.client)), [], 'no key changed by the refused edit');
      assert.equal(await redis.client.dbsize(), size);
      assert.deepEqual(await admin.schedules.get(KEPT), kept);
    });
  }

  it('the same spec under the size bound is stored: the bound is what refuses it', async () => {
    const blob = 'é'.repeat(7 * 1024);
    assert.ok(Buffer.byteLength(JSON.stringify({ job: 'work', every: '1h', data: { blob } })) < MAX_SPEC_BYTES);
    assert.deepEqual(await admin.schedules.upsert('size-ok', { job: 'work', every: '1h', data: { blob } }), { id: 'size-ok', version: 1, changed: true });
    assert.equal(await admin.schedules.remove('size-ok'), true);
  });
});
