import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { TickFlow } from '../../src/scheduling/define-job.js';
import { loadJobs } from '../../src/scheduling/loader.js';

const fixtures = fileURLToPath(new URL('../fixtures/', import.meta.url));
const shown = (dir: string, file: string): string => path.relative(process.cwd(), path.join(fixtures, dir, file));

describe('loadJobs: a folder of valid job files', () => {
  it('loads every job file and ignores helpers and other files', async () => {
    const { jobs, errors } = await loadJobs(path.join(fixtures, 'jobs-good'));
    assert.deepEqual(errors, []);
    assert.deepEqual([...jobs.keys()].sort(), ['every-second', 'fan-out', 'heartbeat', 'nightly-report']);
    const report = jobs.get('nightly-report')!;
    assert.equal(report.file, path.join(fixtures, 'jobs-good', 'nightly-report.ts'));
    assert.deepEqual(report.trigger, { kind: 'cron', expression: '30 2 * * *' });
    assert.equal(report.timezone, 'Europe/Berlin');
    assert.deepEqual(report.catchup, { windowMs: 3_600_000, mode: 'latest', max: 10 });
    assert.equal(report.maxJitterMs, 30_000);
    assert.deepEqual(jobs.get('heartbeat')!.trigger, { kind: 'every', everyMs: 30_000 });
    assert.equal(jobs.get('every-second')!.paused, true);
  });

  it('keeps the handler and flow functions callable', async () => {
    const { jobs } = await loadJobs(path.join(fixtures, 'jobs-good'));
    const fanOut = jobs.get('fan-out')!;
    assert.equal(fanOut.handler, undefined);
    const flow: TickFlow = await fanOut.flow!({ tick: new Date(0), data: fanOut.data });
    assert.equal(flow.queueName, undefined);
    assert.deepEqual(
      flow.children?.map((child) => child.data as unknown),
      [0, 1, 2].map((shard) => ({ shard, tick: 0 })),
    );
  });
});

describe('loadJobs: a folder of broken job files', () => {
  it('loads what it can and explains every broken file by file and field', async () => {
    const { jobs, errors } = await loadJobs(path.join(fixtures, 'jobs-bad'));
    assert.deepEqual([...jobs.keys()], ['duplicate']);
    assert.equal(jobs.get('duplicate')!.file, path.join(fixtures, 'jobs-bad', 'dup-a.ts'));
    const file = (name: string): string => shown('jobs-bad', name);
    assert.deepEqual(
      errors.map((error) => error.message),
      [
        `${file('bad-cron.ts')}: schedule "61 * * * *": minute must be 0-59 (got 61)`,
        `${file('bad-name.ts')}: name "reports:daily": may contain only letters, digits, ".", "_" and "-", must start with a letter or digit and be at most 128 long (^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$), because it becomes part of BullMQ job ids and Redis keys, where ":" separates the parts`,
        `${file('bad-timezone.ts')}: timezone "Mars/Phobos": unknown time zone; use an IANA name like "Europe/Berlin"`,
        `${file('dup-b.ts')}: name "duplicate" is already defined in ${file('dup-a.ts')}, which keeps running it; this file is ignored until one of them is renamed`,
        `${file('missing-handler.js')}: handler: missing; export a handler(job, ctx) function, a flow({ tick, data }) function, or both`,
        `${file('no-default.ts')}: has no default export; add \`export default defineJob({ ... })\``,
        `${file('throws.ts')}: threw while being imported: Error: database connection string is not configured`,
        `${file('typo-field.js')}: shedule: unknown field; did you mean "schedule"?`,
      ],
    );
    for (const error of errors) {
      assert.ok(path.isAbsolute(error.file));
      assert.ok(error.message.startsWith(`${path.relative(process.cwd(), error.file)}: `), error.message);
    }
  });

  it('rejects a folder that does not exist', async () => {
    await assert.rejects(loadJobs(path.join(fixtures, 'no-such-folder')), { code: 'ENOENT' });
  });
});

describe('loadJobs: syntax errors', () => {
  let dir: string;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-syntax-'));
    await writeFile(path.join(dir, 'package.json'), '{ "type": "module" }\n');
    await writeFile(path.join(dir, 'broken.ts'), "export default {\n  name: 'broken',\n");
    await writeFile(path.join(dir, 'broken-js.mjs'), "export default {\n  name: 'broken-js', ;\n};\n");
    await writeFile(path.join(dir, 'fine.mjs'), "export default { name: 'fine', every: '1m', handler: () => 1 };\n");
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reports the file and the line, for JavaScript as for TypeScript', async () => {
    const { jobs, errors } = await loadJobs(dir);
    assert.deepEqual([...jobs.keys()], ['fine']);
    assert.deepEqual(errors, [
      { file: path.join(dir, 'broken-js.mjs'), message: `${path.join(dir, 'broken-js.mjs')}: has a syntax error on line 2: Unexpected token ';'` },
      {
        file: path.join(dir, 'broken.ts'),
        message: `${path.join(dir, 'broken.ts')}: has a syntax error on line 3: Expected identifier but found end of file`,
      },
    ]);
  });
});

describe('loadJobs: TypeScript job files outside an ES-module package', () => {
  const job = [
    "const every: string = '5s';",
    'const settings = await Promise.resolve({ queue: "reports" });',
    "export default { name: 'typed', every, queue: settings.queue, handler: (): number => 1 };",
    '',
  ].join('\n');

  for (const [scope, packageJson] of [
    ['no package.json', undefined],
    ['a package.json without "type"', '{ "name": "ops-jobs" }\n'],
    ['"type": "commonjs"', '{ "type": "commonjs" }\n'],
  ] as const) {
    it(`loads a .ts job with types and top-level await under ${scope}`, async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'leasebeat-scope-'));
      try {
        if (packageJson) await writeFile(path.join(dir, 'package.json'), packageJson);
        await writeFile(path.join(dir, 'typed.ts'), job);
        const { jobs, errors } = await loadJobs(dir);
        assert.deepEqual(errors, []);
        assert.equal(jobs.get('typed')?.queue, 'reports');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }
});
