import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { Queue, Worker, type QueueOptions } from 'bullmq';
import { BullmqImportError, createAdmin, importBullmqSchedulers, type Admin, type BullmqImportReport } from '../../src/index.js';
import { formatImportReport } from '../../src/cli/import-command.js';
import { compileSchedule } from '../../src/schedules/spec.js';
import { nextTicks } from '../../src/scheduling/plan.js';
import { runCli } from '../support/cli.js';
import { useRedis } from '../support/redis-server.js';
import { SCHEDULE_JOBS } from '../support/schedule-instance.js';
import { until } from '../support/until.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** [key, outcome] of each row, in key order. */
function outcomes(report: BullmqImportReport): Array<[string, string]> {
  return report.rows.map((row) => [row.key, row.outcome]);
}

function rowOf(report: BullmqImportReport, key: string): BullmqImportReport['rows'][number] {
  const row = report.rows.find((r) => r.key === key);
  assert.ok(row, `no row for ${key}`);
  return row;
}

describe('importBullmqSchedulers: Job Schedulers made by BullMQ become runtime schedules (real Redis and BullMQ)', () => {
  const redis = useRedis({ flush: true });
  let admin: Admin;
  const queues: Queue[] = [];
  /** A BullMQ queue of the application being moved, closed after the suite. */
  const bullmq = (name: string, options: Omit<QueueOptions, 'connection'> = {}): Queue => {
    const queue = new Queue(name, { connection: redis.client, ...options });
    queues.push(queue);
    return queue;
  };
  /** Everything in Redis, to show that a call wrote nothing. */
  const snapshot = async (): Promise<Record<string, string>> => {
    const dump: Record<string, string> = {};
    for (const key of (await redis.client.keys('*')).sort()) dump[key] = (await redis.client.dumpBuffer(key))?.toString('hex') ?? '';
    return dump;
  };
  before(() => {
    admin = createAdmin({ connection: redis.server.url, jobsDir: SCHEDULE_JOBS, who: 'test@ci' });
  });
  redis.beforeClose(async () => {
    await Promise.all(queues.map((queue) => queue.close()));
    await admin.close();
  });

  it('maps pattern and tz, every, startDate/endDate and template data; the schedules tick when BullMQ would', async () => {
    const queue = bullmq('mail');
    const startDate = Date.now() + DAY;
    const endDate = startDate + 30 * DAY;
    await queue.upsertJobScheduler(
      'nightly-report',
      { pattern: '30 2 * * *', tz: 'Europe/Berlin' },
      { name: 'report', data: { to: 'ops@example.com' }, opts: { attempts: 3, backoff: { type: 'exponential', delay: 1_000 }, removeOnComplete: 10 } },
    );
    await queue.upsertJobScheduler('heartbeat', { every: 5 * 60_000 });
    await queue.upsertJobScheduler('campaign', { pattern: '0 9 * * 1-5', startDate, endDate }, { data: { campaign: 7 } });
    await queue.upsertJobScheduler('every-10s', { pattern: '*/10 * * * * *' });

    const report = await importBullmqSchedulers(admin.schedules, queue, { job: 'work', idPrefix: 'mail.' });
    assert.deepEqual(outcomes(report), [['campaign', 'created'], ['every-10s', 'created'], ['heartbeat', 'created'], ['nightly-report', 'created']]);
    assert.deepEqual(report.counts.created, 4);
    assert.ok(report.rows.every((row) => !row.removedFromBullmq), 'nothing is removed without remove');

    const note = (key: string): string => `imported from BullMQ queue "mail", scheduler "${key}"`;
    const spec = async (id: string): Promise<unknown> => (await admin.schedules.get(id))?.spec;
    assert.deepEqual(await spec('mail.nightly-report'), { job: 'work', schedule: '30 2 * * *', timezone: 'Europe/Berlin', data: { to: 'ops@example.com' }, note: note('nightly-report') });
    assert.deepEqual(await spec('mail.campaign'), {
      job: 'work',
      schedule: '0 9 * * 1-5',
      data: { campaign: 7 },
      startAt: new Date(startDate).toISOString(),
      endAt: new Date(endDate).toISOString(),
      note: note('campaign'),
    });
    assert.deepEqual(await spec('mail.every-10s'), { job: 'work', schedule: '*/10 * * * * *', note: note('every-10s') });
    const heartbeat = (await admin.schedules.get('mail.heartbeat'))!;
    assert.equal(heartbeat.spec.every, '5m');
    assert.equal(heartbeat.trigger, 'every 5m');

    // The job's name and the options a job type holds in leasebeat are listed, not carried.
    assert.deepEqual(rowOf(report, 'nightly-report').dropped.sort(), ['attempts: 3', 'backoff: {"delay":1000,"type":"exponential"}', 'name: report', 'removeOnComplete: 10']);
    assert.deepEqual(rowOf(report, 'heartbeat').dropped, []);

    // Each schedule's next tick is BullMQ's next run; an interval keeps BullMQ's phase (it started when created).
    const bullNext = async (key: string): Promise<number> => (await queue.getJobScheduler(key))!.next!;
    // From the stored spec: describe() needs an instance that has loaded the schedule.
    const lbNext = async (id: string): Promise<number> => {
      const compiled = compileSchedule(id, (await admin.schedules.get(id))!.spec, undefined);
      assert.ok(compiled.ok);
      return nextTicks(compiled.job, Date.now(), 1)[0]!;
    };
    assert.equal(await lbNext('mail.nightly-report'), await bullNext('nightly-report'));
    assert.equal(await lbNext('mail.campaign'), await bullNext('campaign'));
    const beat = await lbNext('mail.heartbeat');
    assert.ok(beat > Date.now());
    assert.equal((beat - (await bullNext('heartbeat'))) % (5 * 60_000), 0, 'ticks in phase with BullMQ');
    assert.equal((await lbNext('mail.every-10s')) % 10_000, 0);
  });

  it('a limit becomes the runs left; one used up is not imported', { timeout: 30_000 }, async () => {
    const queue = bullmq('limits');
    await queue.upsertJobScheduler('five', { every: HOUR, limit: 5 });
    await queue.upsertJobScheduler('once', { every: HOUR, limit: 1 });
    // Each scheduler's first run is due at once: a worker runs it, and BullMQ makes the next (in an hour).
    const worker = new Worker('limits', () => Promise.resolve(), { connection: { host: '127.0.0.1', port: redis.server.port } });
    try {
      await until('both first runs', async () => (await queue.getCompletedCount()) === 2);
    } finally {
      await worker.close();
    }
    assert.equal((await queue.getJobScheduler('five'))?.iterationCount, 2, 'BullMQ counts the delayed next run as made');

    const report = await importBullmqSchedulers(admin.schedules, queue, { job: 'work' });
    assert.deepEqual(outcomes(report), [['five', 'created'], ['once', 'unmapped']]);
    assert.equal((await admin.schedules.get('five'))?.spec.limit, 4, 'one of five ran; the delayed one is taken back with the scheduler');
    assert.match(rowOf(report, 'once').reason!, /^limit 1: already used up by BullMQ/);
    assert.equal(await admin.schedules.get('once'), undefined);
  });

  it('remove takes out only the schedulers imported, each once its schedule is stored; the rest stay, each with its reason', async () => {
    // A custom repeat strategy is how BullMQ holds patterns its own cron parser (and leasebeat) refuse.
    const queue = bullmq('odd', { settings: { repeatStrategy: (millis: number) => millis + 60_000 } });
    await queue.upsertJobScheduler('quartz-year', { pattern: '0 0 12 1 1 * 2030' });
    await queue.upsertJobScheduler('fixed-offset', { pattern: '0 9 * * *', tz: 'UTC+5' });
    await queue.upsertJobScheduler('tenant:42', { every: 60_000 });
    await queue.upsertJobScheduler('fast', { every: 500 });
    await queue.upsertJobScheduler('nightly', { every: 60_000 });
    await queue.upsertJobScheduler('hand', { every: 60_000 });
    await queue.upsertJobScheduler('fine', { pattern: '0 9 * * *' });
    await queue.upsertJobScheduler('fine-too', { every: 60_000 });
    await admin.schedules.upsert('hand', { job: 'work', every: '1h' });

    // Each removal records whether the schedule was stored when it began.
    const stored: Array<[string, boolean]> = [];
    const watched = new Proxy(queue, {
      get(target, property) {
        if (property === 'removeJobScheduler') {
          return async (key: string) => {
            stored.push([key, (await admin.schedules.get(key)) !== undefined]);
            return target.removeJobScheduler(key);
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const report = await importBullmqSchedulers(admin.schedules, watched, { job: 'work', remove: true });

    assert.deepEqual(outcomes(report), [
      ['fast', 'unmapped'],
      ['fine', 'created'],
      ['fine-too', 'created'],
      ['fixed-offset', 'unmapped'],
      ['hand', 'unmapped'],
      ['nightly', 'unmapped'],
      ['quartz-year', 'unmapped'],
      ['tenant:42', 'unmapped'],
    ]);
    const reason = (key: string): string => rowOf(report, key).reason ?? '';
    assert.match(reason('quartz-year'), /^schedule "quartz-year": schedule "0 0 12 1 1 \* 2030": has 7 fields; use 5 .* or 6 \(second first\)$/);
    assert.match(reason('fixed-offset'), /timezone "UTC\+5": unknown time zone; use an IANA name/);
    assert.match(reason('fast'), /every "500ms": must be at least 1s/);
    assert.match(reason('tenant:42'), /^key "tenant:42": "tenant:42" is not a schedule id/);
    assert.match(reason('nightly'), /is the name of the file job/);
    assert.match(reason('hand'), /^id "hand": already a schedule this import did not write \(every 1h, job type "work", by test@ci\)/);

    assert.deepEqual(stored, [['fine', true], ['fine-too', true]], 'removed only after its schedule was stored');
    assert.deepEqual(report.rows.filter((row) => row.removedFromBullmq).map((row) => row.key), ['fine', 'fine-too']);
    const left = (await queue.getJobSchedulers()).map((s) => s.key).sort();
    assert.deepEqual(left, ['fast', 'fixed-offset', 'hand', 'nightly', 'quartz-year', 'tenant:42']);
    const hand = await admin.schedules.get('hand');
    assert.deepEqual([hand?.version, hand?.spec.every], [1, '1h'], 'the schedule made by hand is left as it was');
  });

  it('a dry run checks every scheduler as an import would, and writes and removes nothing', async () => {
    const queue = bullmq('dry');
    await queue.upsertJobScheduler('a', { pattern: '0 9 * * *', tz: 'Europe/Paris' }, { data: { n: 1 } });
    await queue.upsertJobScheduler('b', { every: 60_000 });
    await queue.upsertJobScheduler('c', { pattern: '0 9 * * *', tz: 'UTC+5' });
    const before = await snapshot();

    const report = await importBullmqSchedulers(admin.schedules, queue, { job: 'work', dryRun: true, remove: true });
    assert.deepEqual(outcomes(report), [['a', 'would-create'], ['b', 'would-create'], ['c', 'unmapped']]);
    assert.match(rowOf(report, 'c').reason!, /timezone "UTC\+5": unknown time zone/);
    assert.deepEqual(rowOf(report, 'a').spec, { job: 'work', schedule: '0 9 * * *', timezone: 'Europe/Paris', data: { n: 1 }, note: 'imported from BullMQ queue "dry", scheduler "a"' });
    assert.deepEqual(await snapshot(), before, 'Redis is as it was');

    const lines = formatImportReport(report, { prefix: 'bull', remove: true });
    assert.match(lines[0]!, /^BULLMQ SCHEDULER +SCHEDULE +OUTCOME +RUNS +NOTES$/);
    assert.match(lines[1]!, /^a +a +would-create +0 9 \* \* \*, Europe\/Paris$/);
    assert.match(lines[3]!, /^c +- +unmapped +- +schedule "c": timezone "UTC\+5": unknown time zone/);
    assert.equal(lines.at(-1), 'dry run of queue "dry", nothing written: 2 would be created, 0 updated, 0 unchanged, 1 cannot be imported; --remove would remove 2 from BullMQ');
  });

  it('running it again is unchanged (no new version); a scheduler changed in BullMQ is updated', async () => {
    const queue = bullmq('again');
    await queue.upsertJobScheduler('a', { pattern: '0 9 * * *', tz: 'Europe/Paris' }, { data: { n: 1 } });
    await queue.upsertJobScheduler('b', { every: 60_000 });
    assert.deepEqual(outcomes(await importBullmqSchedulers(admin.schedules, queue, { job: 'work' })), [['a', 'created'], ['b', 'created']]);
    assert.deepEqual(outcomes(await importBullmqSchedulers(admin.schedules, queue, { job: 'work' })), [['a', 'unchanged'], ['b', 'unchanged']]);
    assert.deepEqual([(await admin.schedules.get('a'))?.version, (await admin.schedules.get('b'))?.version], [1, 1]);

    await queue.upsertJobScheduler('a', { pattern: '0 10 * * *', tz: 'Europe/Paris' }, { data: { n: 2 } });
    assert.deepEqual(outcomes(await importBullmqSchedulers(admin.schedules, queue, { job: 'work' })), [['a', 'updated'], ['b', 'unchanged']]);
    const a = await admin.schedules.get('a');
    assert.deepEqual([a?.version, a?.spec.schedule, a?.spec.data], [2, '0 10 * * *', { n: 2 }]);
    assert.deepEqual(outcomes(await importBullmqSchedulers(admin.schedules, queue, { job: 'work', dryRun: true })), [['a', 'unchanged'], ['b', 'unchanged']]);
    // The second step of a move: the same import with remove, which finds them unchanged.
    const removed = await importBullmqSchedulers(admin.schedules, queue, { job: 'work', remove: true });
    assert.deepEqual(removed.rows.map((row) => [row.outcome, row.removedFromBullmq]), [['unchanged', true], ['unchanged', true]]);
    assert.equal(await queue.getJobSchedulersCount(), 0);
  });

  it('a --job that is not a job type, or a bad id prefix, is one line naming it, and nothing is written', async () => {
    const queue = bullmq('typo');
    await queue.upsertJobScheduler('a', { every: 60_000 });
    const before = await snapshot();
    const refused = (code: string, pattern: RegExp) => (error: unknown) => {
      assert.ok(error instanceof BullmqImportError, String(error));
      assert.equal(error.code, code);
      assert.equal(error.message.split('\n').length, 1, error.message);
      assert.match(error.message, pattern);
      return true;
    };
    await assert.rejects(importBullmqSchedulers(admin.schedules, queue, { job: 'wrok', remove: true }), refused('invalid-job', /^job "wrok": unknown job type; did you mean "work"\?/));
    await assert.rejects(importBullmqSchedulers(admin.schedules, queue, { job: 'nightly', remove: true }), refused('invalid-job', /^job "nightly": is a scheduled file job, not a job type/));
    await assert.rejects(importBullmqSchedulers(admin.schedules, queue, { job: 'work', idPrefix: 'bull:' }), refused('invalid-id-prefix', /^idPrefix "bull:": must be the start of a schedule id/));
    assert.deepEqual(await snapshot(), before);
  });

  it('leasebeat import bullmq prints the table and the summary, and exits 4 when some were imported and one was not', { timeout: 60_000 }, async () => {
    const queue = bullmq('cli');
    await queue.upsertJobScheduler('ok', { every: 60_000 });
    await queue.upsertJobScheduler('bad:key', { every: 60_000 });
    const result = await runCli(['import', 'bullmq', '--queue', 'cli', '--job', 'work', '--id-prefix', 'cli.', '--remove'], {
      env: { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: SCHEDULE_JOBS },
    });
    assert.equal(result.code, 4, result.stderr);
    const lines = result.stdout.trim().split('\n');
    assert.match(lines[0]!, /^BULLMQ SCHEDULER +SCHEDULE +OUTCOME/);
    assert.match(lines.find((line) => line.startsWith('ok '))!, /cli\.ok +created +every 1m\b.*removed from BullMQ$/);
    assert.match(lines.find((line) => line.startsWith('bad:key '))!, /unmapped .*is not a schedule id/);
    assert.equal(lines.at(-1), 'queue "cli" as job type work: 1 created, 0 updated, 0 unchanged, 1 not imported; 1 removed from BullMQ');
    assert.deepEqual((await queue.getJobSchedulers()).map((s) => s.key), ['bad:key']);
  });

  it('a queue under a custom BullMQ prefix is read, and its limits counted, under that prefix; under the default one nothing is found', { timeout: 30_000 }, async () => {
    const legacy = bullmq('billing', { prefix: 'legacy' });
    await legacy.upsertJobScheduler('invoice', { pattern: '0 6 * * *', tz: 'Europe/Berlin' }, { data: { run: 'invoice' } });
    await legacy.upsertJobScheduler('trial', { every: HOUR, limit: 3 });
    // The first run of trial is due at once; BullMQ then makes its next, delayed, under the same prefix.
    const worker = new Worker('billing', () => Promise.resolve(), { connection: { host: '127.0.0.1', port: redis.server.port }, prefix: 'legacy' });
    try {
      await until('the first run of trial', async () => (await legacy.getCompletedCount()) === 1);
    } finally {
      await worker.close();
    }

    // The same queue name under BullMQ's default prefix is another queue, with no schedulers.
    const unprefixed = bullmq('billing');
    await unprefixed.getVersion(); // a Queue writes its meta hash once connected; the import itself writes nothing
    const before = await snapshot();
    const none = await importBullmqSchedulers(admin.schedules, unprefixed, { job: 'work', idPrefix: 'billing.', remove: true });
    assert.deepEqual([none.rows, none.filteredOut], [[], []]);
    assert.deepEqual(formatImportReport(none, { prefix: 'bull', remove: true }), [
      'no Job Schedulers to import in BullMQ queue "billing" under prefix "bull": check --queue, --bullmq-prefix and --name',
    ]);
    assert.deepEqual(await snapshot(), before, 'nothing written or removed');

    const report = await importBullmqSchedulers(admin.schedules, legacy, { job: 'work', idPrefix: 'billing.' });
    assert.deepEqual(outcomes(report), [['invoice', 'created'], ['trial', 'created']]);
    assert.deepEqual((await admin.schedules.get('billing.invoice'))?.spec, {
      job: 'work',
      schedule: '0 6 * * *',
      timezone: 'Europe/Berlin',
      data: { run: 'invoice' },
      note: 'imported from BullMQ queue "billing", scheduler "invoice"',
    });
    assert.equal((await admin.schedules.get('billing.trial'))?.spec.limit, 2, 'one of three ran; the delayed one, read under "legacy", is taken back');
  });

  it('leasebeat import bullmq --bullmq-prefix imports and removes under that prefix only; without it, says none was found', { timeout: 60_000 }, async () => {
    const legacy = bullmq('billing', { prefix: 'legacy' });
    await legacy.upsertJobScheduler('invoice', { pattern: '0 6 * * *' });
    await legacy.upsertJobScheduler('sync', { every: 60_000 });
    const env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: SCHEDULE_JOBS };
    const args = ['import', 'bullmq', '--queue', 'billing', '--job', 'work', '--id-prefix', 'billing.', '--remove'];

    const missed = await runCli(args, { env });
    assert.equal(missed.code, 1, missed.stderr);
    assert.equal(missed.stdout.trim(), 'no Job Schedulers to import in BullMQ queue "billing" under prefix "bull": check --queue, --bullmq-prefix and --name');
    assert.equal((await admin.schedules.list()).total, 0);
    assert.equal(await legacy.getJobSchedulersCount(), 2, 'nothing removed');
    // Reading a queue writes nothing to it: a mistyped prefix leaves no stray queue behind.
    assert.deepEqual(await redis.client.keys('bull:billing:*'), []);

    // A queue of the same name under the default prefix: not read, not removed.
    const other = bullmq('billing');
    await other.upsertJobScheduler('keep', { every: 60_000 });
    const moved = await runCli([...args, '--bullmq-prefix', 'legacy'], { env });
    assert.equal(moved.code, 0, moved.stderr + moved.stdout);
    const lines = moved.stdout.trim().split('\n');
    assert.match(lines.find((line) => line.startsWith('invoice '))!, /billing\.invoice +created +0 6 \* \* \*.*removed from BullMQ$/);
    assert.match(lines.find((line) => line.startsWith('sync '))!, /billing\.sync +created +every 1m\b.*removed from BullMQ$/);
    assert.equal(lines.at(-1), 'queue "billing" as job type work: 2 created, 0 updated, 0 unchanged, 0 not imported; 2 removed from BullMQ');
    assert.equal(await legacy.getJobSchedulersCount(), 0);
    assert.deepEqual((await other.getJobSchedulers()).map((s) => s.key), ['keep']);
    assert.deepEqual((await admin.schedules.list()).schedules.map((view) => view.id), ['billing.invoice', 'billing.sync']);
  });
});
