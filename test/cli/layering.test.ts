import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';

const root = new URL('../../', import.meta.url).pathname;

describe('src/cli uses only the public API', () => {
  it('the lint rule refuses an internal import in src/cli and accepts ../index.js', { timeout: 120_000 }, async () => {
    const eslint = new ESLint({ cwd: root });
    const lint = async (text: string): Promise<string[]> => {
      const [result] = await eslint.lintText(text, { filePath: `${root}src/cli/main.ts` });
      return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
    };
    const internal = await lint("import { TickLedger } from '../queueing/tick-ledger.js';\nexport const ledger = TickLedger;\n");
    assert.equal(internal.length, 1);
    assert.match(internal[0]!, /uses only the public API: import from \.\.\/index\.js/);
    assert.deepEqual(await lint("import { createAdmin } from '../index.js';\nexport const admin = createAdmin;\n"), []);
    assert.deepEqual(await lint("import { SETTINGS } from '../config/cli-support.js';\nexport const settings = SETTINGS;\n"), [], 'the CLI\'s second entry point');
    assert.equal((await lint("import { SETTINGS } from '../config/settings.js';\nexport const settings = SETTINGS;\n")).length, 1, 'not the module behind it');
    assert.deepEqual(await lint("import { redisAnswers } from './embedded-redis.js';\nexport const probe = redisAnswers;\n"), []);
  });
});

/**
 * The layers of src/, lowest first: a module may import from its own layer and the ones below it, never
 * from one above. The top-level files sit above every folder; the CLI sits on the public API alone.
 */
const LAYERS = ['util', 'scheduling', 'election', 'redis', 'ledger', 'workers', 'producing', 'members', 'schedules', 'admin', 'serving', 'config', 'job.ts', 'scheduler.ts', 'index.ts', 'cli'];

/** Every relative import of every module under src/ (type-only ones too: a type cycle is a cycle). */
function importGraph(): Map<string, string[]> {
  const src = join(root, 'src');
  const graph = new Map<string, string[]>();
  for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((path) => path.endsWith('.ts'))) {
    const text = readFileSync(join(src, file), 'utf8');
    const targets = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map(([, spec]) =>
      relative(src, resolve(dirname(join(src, file)), spec!)).replace(/\.js$/, '.ts'),
    );
    graph.set(file, targets);
  }
  return graph;
}

const layerOf = (file: string): number => LAYERS.indexOf(file.split('/')[0]!);

describe('src/ layers and modules', () => {
  const graph = importGraph();

  it('every module sits in a known layer and imports only from its own or a lower one', () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      assert.notEqual(layerOf(file), -1, `${file} is in no layer: add its folder to LAYERS`);
      for (const target of targets) if (layerOf(target) > layerOf(file)) upward.push(`${file} → ${target}`);
    }
    assert.deepEqual(upward, []);
  });

  it('no module imports itself back through others', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]): void => {
      state.set(file, 'open');
      for (const target of graph.get(file) ?? []) {
        if (state.get(target) === 'open') cycles.push([...path.slice(path.indexOf(target)), target].join(' → '));
        else if (!state.has(target)) visit(target, [...path, target]);
      }
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file, [file]);
    assert.deepEqual(cycles, []);
  });
});
