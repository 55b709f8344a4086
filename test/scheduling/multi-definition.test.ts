import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import { JobRegistry, loadJobs, type RegistryChange } from '../../src/scheduling/loader.js';

const shown = (file: string): string => {
  const relative = path.relative(process.cwd(), file);
  return relative.startsWith('..') ? file : relative;
};

/** The source of a definition object, written as a file would. */
const definition = (fields: Record<string, unknown>): string =>
  `{ ${Object.entries(fields).map(([key, value]) => `${key}: ${JSON.stringify(value)}`).join(', ')}, handler: () => 1 }`;

const everyMs = (jobs: ReadonlyMap<string, { trigger: { kind: string; everyMs?: number } }>, name: string): number | undefined =>
  jobs.get(name)?.trigger.everyMs;

describe('job files that export several definitions', () => {
  let dir: string;
  const file = (name: string): string => path.join(dir, name);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-multi-'));
    await writeFile(file('package.json'), '{ "type": "module" }\n');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads an array, a function returning one, an async function, and an async function returning one definition', async () => {
    await writeFile(file('array.mjs'), `export default [${definition({ name: 'a-0', every: '1m' })}, ${definition({ name: 'a-1', schedule: '0 3 * * *', timezone: 'Europe/Berlin' })}];\n`);
    await writeFile(file('sync.mjs'), `export default () => ['s-0', 's-1', 's-2'].map((name) => ({ name, every: '5m', handler: () => name }));\n`);
    await writeFile(file('async.ts'), `const tenants: string[] = await Promise.resolve(['x', 'y']);\nexport default async () => tenants.map((t) => ({ name: \`tenant-\${t}\`, every: '10m', data: { t }, handler: () => t }));\n`);
    await writeFile(file('one.mjs'), `export default async () => (${definition({ name: 'single', every: '1h' })});\n`);
    const { jobs, errors } = await loadJobs(dir);
    assert.deepEqual(errors, []);
    assert.deepEqual([...jobs.keys()].sort(), ['a-0', 'a-1', 's-0', 's-1', 's-2', 'single', 'tenant-x', 'tenant-y']);
    assert.equal(jobs.get('a-1')!.file, file('array.mjs'));
    assert.equal(jobs.get('a-1')!.timezone, 'Europe/Berlin');
    assert.deepEqual(jobs.get('tenant-y')!.data, { t: 'y' });
    assert.equal(await jobs.get('s-2')!.handler!({} as never, {} as never), 's-2');
    assert.equal(everyMs(jobs, 'single'), 3_600_000);
  });

  it('names the file and the entry (index and name) in every error; one bad entry stops neither the others nor other files', async () => {
    const entries = [
      definition({ name: 'ok-0', every: '1m' }),
      definition({ name: 'bad-cron', schedule: '61 * * * *' }),
      definition({ every: '1m' }),
      definition({ name: 'ok-0', every: '2m' }),
      '42',
      definition({ name: 'ok-5', every: '1m' }),
    ];
    await writeFile(file('tenants.mjs'), `export default [${entries.join(', ')}];\n`);
    await writeFile(file('throws.mjs'), "export default () => { throw new Error('tenant list unreachable'); };\n");
    await writeFile(file('wrong.mjs'), 'export default () => 5;\n');
    await writeFile(file('zz-dup.mjs'), `export default [${definition({ name: 'zz-0', every: '1m' })}, ${definition({ name: 'ok-5', every: '1m' })}];\n`);
    const { jobs, errors } = await loadJobs(dir);
    assert.deepEqual([...jobs.keys()].sort(), ['ok-0', 'ok-5', 'zz-0']);
    assert.equal(everyMs(jobs, 'ok-0'), 60_000, 'the first entry with a name keeps it');
    const tenants = shown(file('tenants.mjs'));
    assert.deepEqual(
      errors.map((error) => error.message),
      [
        `${tenants}: entry 1 ("bad-cron"): schedule "61 * * * *": minute must be 0-59 (got 61)`,
        `${tenants}: entry 2: name: missing; must be a unique name such as "nightly-report"`,
        `${tenants}: entry 3 ("ok-0"): name "ok-0" is already defined by entry 0 of this file; this entry is ignored until one of them is renamed`,
        `${tenants}: entry 4: default export 42: must be a job definition object: export default defineJob({ name, schedule, handler })`,
        `${shown(file('throws.mjs'))}: threw while building its definitions: Error: tenant list unreachable`,
        `${shown(file('wrong.mjs'))}: default export (a function) returned 5: must return a job definition or an array of them`,
        `${shown(file('zz-dup.mjs'))}: entry 1 ("ok-5"): name "ok-5" is already defined in ${tenants}, which keeps running it; this entry is ignored until one of them is renamed`,
      ],
    );
    assert.deepEqual(errors.map((error) => path.basename(error.file)), ['tenants.mjs', 'tenants.mjs', 'tenants.mjs', 'tenants.mjs', 'throws.mjs', 'wrong.mjs', 'zz-dup.mjs']);
  });

  it('loads 10,000 cron definitions from one file in well under 5 s', async () => {
    await writeFile(
      file('tenants.mjs'),
      "export default Array.from({ length: 10000 }, (_, i) => ({ name: `tenant-${i}`, schedule: `${i % 60} ${i % 24} * * *`, timezone: 'Europe/Berlin', data: { tenant: i }, handler: () => i }));\n",
    );
    const started = performance.now();
    const { jobs, errors } = await loadJobs(dir);
    const tookMs = performance.now() - started;
    assert.deepEqual(errors, []);
    assert.equal(jobs.size, 10_000);
    assert.ok(tookMs < 5_000, `took ${Math.round(tookMs)} ms`);
  });

  it('does not hold the event loop while it validates a large file (the elector and producer keep running)', async () => {
    await writeFile(
      file('tenants.mjs'),
      "export default Array.from({ length: 40000 }, (_, i) => ({ name: `tenant-${i}`, schedule: `${i % 60} ${i % 24} * * *`, handler: () => i }));\n",
    );
    let last = performance.now();
    let longestGapMs = 0;
    const beat = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 5);
    try {
      const { jobs } = await loadJobs(dir);
      assert.equal(jobs.size, 40_000);
    } finally {
      clearInterval(beat);
    }
    // A load that never yields ends before the interval fires again: count the gap up to its end too.
    longestGapMs = Math.max(longestGapMs, performance.now() - last);
    // Validating all 40,000 at once held it for over a second.
    assert.ok(longestGapMs < 600, `the event loop was held for ${Math.round(longestGapMs)} ms`);
  });
});

describe('JobRegistry hot reload of a multi-definition file', () => {
  let dir: string;
  let registry: JobRegistry;
  const file = (name: string): string => path.join(dir, name);
  const write = (entries: string[]): Promise<void> => writeFile(file('tenants.mjs'), `export default [${entries.join(', ')}];\n`);

  function nextChange(what: string, until: (change: RegistryChange) => boolean): Promise<RegistryChange> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no change event within 15 s: ${what}`)), 15_000);
      const listener = (change: RegistryChange): void => {
        if (!until(change)) return;
        clearTimeout(timer);
        registry.off('change', listener);
        resolve(change);
      };
      registry.on('change', listener);
    });
  }

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-multi-reload-'));
    await writeFile(file('package.json'), '{ "type": "module" }\n');
    await write(['a', 'b', 'c'].map((name) => definition({ name, every: '1m' })));
    registry = new JobRegistry(dir, { debounceMs: 50 });
  });
  afterEach(async () => {
    await registry.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('logs a bounded number of names when a file brings many jobs', async () => {
    const lines: Array<{ msg: string; added?: string[] }> = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString()) as never), done()) }));
    await writeFile(file('tenants.mjs'), "export default Array.from({ length: 500 }, (_, i) => ({ name: `t-${i}`, every: '1m', handler: () => i }));\n");
    await registry.close();
    registry = new JobRegistry(dir, { logger });
    await registry.start();
    const changed = lines.find((line) => line.msg === 'job definitions changed')!;
    assert.equal(changed.added!.length, 21);
    assert.equal(changed.added!.at(-1), '… and 480 more');
  });

  it('follows entries added, removed and edited; a broken entry keeps its last good version, a broken file all of them', async () => {
    const initial = await registry.start();
    assert.deepEqual([...initial.jobs.keys()], ['a', 'b', 'c']);

    let changed = nextChange('add d, drop c, edit b', (c) => c.jobs.has('d'));
    await write([definition({ name: 'a', every: '1m' }), definition({ name: 'b', every: '5m' }), definition({ name: 'd', every: '1m' })]);
    let change = await changed;
    assert.deepEqual(change.added, ['d']);
    assert.deepEqual(change.removed, ['c']);
    assert.ok(change.updated.includes('b'));
    assert.equal(everyMs(change.jobs, 'b'), 300_000);

    changed = nextChange('break entry b', (c) => c.errors.length > 0);
    await write([definition({ name: 'a', every: '2m' }), definition({ name: 'b', every: 'soon' }), definition({ name: 'd', every: '1m' })]);
    change = await changed;
    assert.deepEqual([...change.jobs.keys()].sort(), ['a', 'b', 'd']);
    assert.equal(everyMs(change.jobs, 'a'), 120_000, 'the good entries take effect');
    assert.equal(everyMs(change.jobs, 'b'), 300_000, 'the broken entry keeps its last good version');
    assert.equal(change.errors.length, 1);
    assert.match(change.errors[0]!.message, /tenants\.mjs: entry 1 \("b"\): every "soon": is not a duration.*\(the previous version of job "b" keeps running\)$/);

    changed = nextChange('break the file', (c) => c.errors.some((e) => e.message.includes('syntax error')));
    await writeFile(file('tenants.mjs'), 'export default [\n');
    change = await changed;
    assert.deepEqual([...change.jobs.keys()].sort(), ['a', 'b', 'd'], 'a file that no longer loads keeps every job it defined');
    assert.match(change.errors[0]!.message, /\(the previous versions of its 3 jobs keep running\)$/);

    changed = nextChange('fix the file', (c) => c.errors.length === 0);
    await write([definition({ name: 'a', every: '1m' })]);
    change = await changed;
    assert.deepEqual([...change.jobs.keys()], ['a']);
    assert.deepEqual(change.removed.sort(), ['b', 'd']);
  });
});
