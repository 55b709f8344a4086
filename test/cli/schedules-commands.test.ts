import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { oneLine, runCli, type CliResult } from '../support/cli.js';
import { useRedis } from '../support/redis-server.js';
import { SCHEDULE_JOBS, useScheduleInstance } from '../support/schedule-instance.js';

/** The lines a failed command printed on stderr, each without the `leasebeat: ` every one starts with. */
function problems(result: CliResult): string[] {
  const lines = result.stderr.trim().split('\n');
  for (const line of lines) assert.match(line, /^leasebeat: /, result.stderr);
  return lines.map((line) => line.slice('leasebeat: '.length));
}

describe('leasebeat schedules, on a real Redis with one running instance', () => {
  const redis = useRedis();
  const instance = useScheduleInstance(redis);
  let env: Record<string, string>;
  let dir: string;
  const cli = (...args: string[]): Promise<CliResult> => runCli(['schedules', ...args], { env });
  const stored = (id: string) => instance.scheduler.schedules.get(id);

  before(async () => {
    env = { LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: SCHEDULE_JOBS };
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-specs-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('upsert by flags stores every field; the same flags again change nothing; a stale --expected-version is refused', async () => {
    const args = [
      'upsert', 'tenant-1', '--job', 'work', '--schedule', '0 9 * * 1-5', '--timezone', 'Europe/Berlin', '--data', '{"tenant": 1}',
      '--overlap', 'skip', '--catchup-window', '1h', '--catchup-mode', 'all', '--catchup-max', '3', '--jitter', '30s', '--limit', '20', '--note', 'billing run',
    ];
    const first = await cli(...args);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, 'upserted tenant-1 version 1\n');
    const spec = (await stored('tenant-1'))?.spec;
    assert.deepEqual(
      { ...spec, limitEndsAt: undefined },
      {
        job: 'work', schedule: '0 9 * * 1-5', timezone: 'Europe/Berlin', data: { tenant: 1 }, overlap: 'skip',
        catchup: { window: '1h', mode: 'all', max: 3 }, jitter: '30s', limit: 20, note: 'billing run', limitEndsAt: undefined,
      },
    );
    assert.ok(typeof spec?.limitEndsAt === 'number', 'the limit fixed its last tick');

    const [again, stale] = await Promise.all([cli(...args), cli('upsert', 'tenant-1', '--job', 'work', '--every', '1h', '--expected-version', '0')]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, 'unchanged tenant-1 version 1\n');
    assert.equal(stale.code, 2);
    assert.match(oneLine(stale), /^leasebeat: schedule "tenant-1" is at version 1, not the version the write expected/);
    const cas = await cli('upsert', 'tenant-1', '--job', 'work', '--every', '1h', '--expected-version', '1');
    assert.equal(cas.stdout, 'upserted tenant-1 version 2\n', cas.stderr);
  });

  it('upsert by a YAML or JSON --file; flags override its fields, a timing flag its timing', async () => {
    const yaml = join(dir, 'tenant-2.yaml');
    await writeFile(yaml, ['job: work', 'schedule: "*/15 * * * *"', 'paused: true', 'data:', '  tenant: 2', '  regions: [eu, us]', 'catchup:', '  mode: none', ''].join('\n'));
    const json = join(dir, 'tenant-3.json');
    await writeFile(json, JSON.stringify({ job: 'report', every: '6h', note: 'from json' }));
    const [fromYaml, fromJson] = await Promise.all([
      cli('upsert', 'tenant-2', '--file', yaml, '--every', '2h', '--no-paused', '--catchup-max', '1'),
      cli('upsert', 'tenant-3', '-f', json),
    ]);
    assert.equal(fromYaml.stdout, 'upserted tenant-2 version 1\n', fromYaml.stderr);
    assert.equal(fromJson.stdout, 'upserted tenant-3 version 1\n', fromJson.stderr);
    assert.deepEqual((await stored('tenant-2'))?.spec, { job: 'work', every: '2h', data: { tenant: 2, regions: ['eu', 'us'] }, catchup: { mode: 'none', max: 1 }, paused: false });
    assert.deepEqual((await stored('tenant-3'))?.spec, { job: 'report', every: '6h', note: 'from json' });
  });

  it('ls pages with the cursor it prints, filters by job type and search, and prints JSON', async () => {
    for (let i = 0; i < 5; i++) await instance.scheduler.schedules.upsert(`page-${i}`, { job: i === 3 ? 'report' : 'work', every: `${i + 1}h` });
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; ; pages++) {
      assert.ok(pages < 5, 'the cursor ends');
      const page = await cli('ls', '--search', 'page-', '--limit', '2', ...(cursor === undefined ? [] : ['--cursor', cursor]));
      assert.equal(page.code, 0, page.stderr);
      const lines = page.stdout.trimEnd().split('\n');
      assert.match(lines[0]!, /^ID\s+JOB\s+TRIGGER\s+PAUSED\s+VERSION\s+UPDATED\s+PROBLEM$/);
      cursor = /^next page: --cursor (\S+)$/.exec(lines.at(-1)!)?.[1];
      const rows = lines.slice(1, cursor === undefined ? undefined : -1);
      assert.ok(rows.length <= 2, page.stdout);
      seen.push(...rows.map((row) => row.split(/\s+/)[0]!));
      if (cursor === undefined) break;
    }
    assert.deepEqual(seen, ['page-0', 'page-1', 'page-2', 'page-3', 'page-4']);

    const [byJob, json] = await Promise.all([cli('ls', '--job', 'report', '--search', 'page-'), cli('ls', '--search', 'page-3', '--json')]);
    assert.deepEqual(byJob.stdout.trimEnd().split('\n').slice(1).map((row) => row.split(/\s+/).slice(0, 5)), [['page-3', 'report', 'every', '4h', 'no']]);
    const listed = JSON.parse(json.stdout) as { schedules: Array<{ id: string; version: number; trigger: string }>; cursor?: string; total: number };
    assert.deepEqual(listed.schedules.map(({ id, version, trigger }) => ({ id, version, trigger })), [{ id: 'page-3', version: 1, trigger: 'every 4h' }]);
    assert.ok(listed.total >= 5);
  });

  it('pause with a note, trigger refused while paused, resume, trigger through the running leader; describe shows it all', { timeout: 60_000 }, async () => {
    await instance.scheduler.schedules.upsert('live', { job: 'work', schedule: '30 6 * * *', timezone: 'America/New_York', data: { live: true } });
    await instance.loaded('live');
    const paused = await cli('pause', 'live', '--note', 'tenant suspended');
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, /^paused live: .*`leasebeat schedules resume live`/);
    const [listed, refused] = await Promise.all([cli('ls', '--search', 'live'), cli('trigger', 'live')]);
    assert.match(listed.stdout, /^live\s+work\s+30 6 \* \* \*\s+yes: tenant suspended\s+1\s/m);
    assert.equal(refused.code, 2);
    assert.match(oneLine(refused), /live is paused/);

    assert.equal((await cli('resume', 'live')).stdout, 'resumed live\n');
    assert.equal((await cli('resume', 'live')).stdout, 'live was not paused\n');
    const triggered = await cli('trigger', 'live');
    assert.equal(triggered.code, 0, triggered.stderr);
    const jobId = /^triggered live: job (\S+) on queue leasebeat$/m.exec(triggered.stdout)?.[1] ?? '';
    assert.ok(jobId.startsWith('live@manual-'), triggered.stdout);
    const queue = new Queue('leasebeat', { connection: redis.client });
    try {
      const job = await queue.getJob(jobId);
      assert.equal(job?.name, 'live');
      assert.deepEqual((job?.data as { data: unknown }).data, { live: true });
    } finally {
      await queue.close();
    }

    const described = await cli('describe', 'live', '--ticks', '3', '--runs', '5');
    assert.equal(described.code, 0, described.stderr);
    const lines = described.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^live: job work, 30 6 \* \* \* \(America\/New_York\), version 1, updated \S+ by \S+$/);
    assert.equal(lines[1], 'paused: no');
    const next = lines.slice(lines.indexOf('next 3:') + 1, lines.indexOf('next 3:') + 4);
    assert.equal(next.length, 3);
    for (const tick of next) assert.match(tick, /^ {2}\d{4}-\d{2}-\d{2} 06:30:00 America\/New_York$/);
    assert.ok(lines.includes('runs, newest first:'), described.stdout);
    assert.ok(lines.some((line) => line.startsWith('  ') && line.includes(`manual run`) && line.includes(jobId)), described.stdout);
    assert.match(lines.at(-1)!, /^enqueued \d+ {2}skipped \{.*\}$/);
    const json = JSON.parse((await cli('describe', 'live', '--json', '--ticks', '2')).stdout) as { next: string[]; timezone: string; runs: unknown[] };
    assert.equal(json.next.length, 2);
    assert.equal(json.timezone, 'America/New_York');
  });

  it('describe of a schedule no leader has run yet', async () => {
    // A cluster of its own (another prefix), where no instance runs: nothing records the schedule.
    const lonely = { env: { ...env, LEASEBEAT_PREFIX: 'lonely' } };
    assert.equal((await runCli(['schedules', 'upsert', 'fresh', '--job', 'work', '--every', '6h'], lonely)).code, 0);
    const described = await runCli(['schedules', 'describe', 'fresh'], lonely);
    assert.equal(described.code, 0, described.stderr);
    assert.match(described.stdout, /nothing recorded yet/);
  });

  it('rm removes once; a stale --expected-version and an unknown id are refused in one line', async () => {
    await instance.scheduler.schedules.upsert('doomed', { job: 'work', every: '1h' });
    const stale = await cli('rm', 'doomed', '--expected-version', '4');
    assert.equal(stale.code, 2);
    assert.match(oneLine(stale), /is at version 1, not the version the write expected/);
    assert.equal((await cli('rm', 'doomed', '--expected-version', '1')).stdout, 'removed doomed\n');
    assert.equal(await stored('doomed'), undefined);
    const [again, describeGone, pauseGone] = await Promise.all([cli('rm', 'doomed'), cli('describe', 'doomed'), cli('pause', 'doomed')]);
    for (const result of [again, describeGone, pauseGone]) {
      assert.equal(result.code, 2, result.stderr);
      assert.equal(oneLine(result), 'leasebeat: no schedule has id "doomed": `leasebeat schedules ls` lists them');
    }
  });

  it('bad input exits 2 with one line per problem and stores nothing', async () => {
    const typo = join(dir, 'typo.yaml');
    await writeFile(typo, 'jb: work\nscheduel: "0 * * * *"\n');
    const broken = join(dir, 'broken.yaml');
    await writeFile(broken, 'job: work\nschedule: [0 * * * *\n');
    const list = join(dir, 'list.json');
    await writeFile(list, '[{"job": "work"}]');
    const results = await Promise.all([
      cli('upsert', 'bad-type', '--job', 'wrok', '--every', '1h'),
      cli('upsert', 'bad-cron', '--job', 'work', '--schedule', '61 * * * *'),
      cli('upsert', 'bad-fields', '--file', typo),
      cli('upsert', 'nightly', '--job', 'work', '--every', '1h'),
      cli('upsert', 'bad-data', '--job', 'work', '--every', '1h', '--data', '{tenant: 1}'),
      cli('upsert', 'bad-file', '--file', broken),
      cli('upsert', 'bad-list', '--file', list),
      cli('upsert', 'bad-limit', '--job', 'work', '--every', '1h', '--limit', 'ten'),
      cli('upsert', 'no-file', '--file', join(dir, 'missing.yaml')),
      cli('upsert'),
    ]);
    const lines = results.map((result) => {
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      return problems(result);
    });
    assert.deepEqual(lines[0], ['schedule "bad-type": job "wrok": unknown job type; did you mean "work"? job types are report, work']);
    assert.equal(lines[1]!.length, 1);
    assert.match(lines[1]![0]!, /^schedule "bad-cron": schedule "61 \* \* \* \*": /);
    assert.deepEqual(lines[2]!.length, 4, lines[2]!.join('\n'));
    assert.match(lines[2]!.join('\n'), /jb: unknown field; did you mean "job"\?[^]*scheduel: unknown field; did you mean "schedule"\?[^]*job: missing[^]*schedule: missing/);
    assert.match(lines[3]!.join('\n'), /^schedule "nightly": id: is the name of the file job in \S+nightly\.js/);
    assert.match(lines[4]!.join('\n'), /^--data: not JSON \(.*\): quote it for the shell/);
    assert.match(lines[5]!.join('\n'), /^--file \S+broken\.yaml: not valid YAML: .* at line \d+, column \d+:?$/);
    assert.match(lines[6]!.join('\n'), /^--file \S+list\.json: holds a list, not one spec/);
    assert.deepEqual(lines[7], ['--limit "ten" must be a whole number']);
    assert.match(lines[8]!.join('\n'), /^--file \S+missing\.yaml: cannot be read \(ENOENT\)/);
    assert.deepEqual(lines[9], ["schedules upsert: missing required argument 'id'; see leasebeat schedules upsert --help"]);
    const ids = (await instance.scheduler.schedules.list({ search: 'bad-' })).schedules.map((s) => s.id);
    assert.deepEqual(ids, []);
  });

  it('--overlap bufferAll with --buffer-max stores the bound; a bound out of range or an unknown policy is refused with one line', async () => {
    const ok = await cli('upsert', 'buffers', '--job', 'work', '--every', '1h', '--overlap', 'bufferAll', '--buffer-max', '4');
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual((await stored('buffers'))?.spec, { job: 'work', every: '1h', overlap: 'bufferAll', bufferMax: 4 });
    const [zero, policy] = await Promise.all([
      cli('upsert', 'bad-bound', '--job', 'work', '--every', '1h', '--overlap', 'bufferAll', '--buffer-max', '0'),
      cli('upsert', 'bad-policy', '--job', 'work', '--every', '1h', '--overlap', 'bufferEvery'),
    ]);
    for (const result of [zero, policy]) assert.equal(result.code, 2, result.stderr);
    assert.deepEqual(problems(zero), ['schedule "bad-bound": bufferMax 0: must be an integer from 1 to 1000: the ticks that may wait behind an unfinished run, e.g. 10']);
    assert.deepEqual(problems(policy), ['schedule "bad-policy": overlap "bufferEvery": must be "allow", "skip", "bufferOne", "bufferAll", "cancelOther" or "terminateOther"']);
    assert.equal(await stored('bad-bound'), undefined);
  });

  it('a bad --data is refused before anything connects', async () => {
    const result = await runCli(['schedules', 'upsert', 'x', '--job', 'work', '--every', '1h', '--data', 'nope'], {
      env: { ...env, LEASEBEAT_REDIS_URL: 'redis://127.0.0.1:1', LEASEBEAT_COMMAND_TIMEOUT: '1s' },
    });
    assert.equal(result.code, 2);
    assert.match(oneLine(result), /^leasebeat: --data: not JSON/);
  });
});
