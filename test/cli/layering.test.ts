import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
    assert.deepEqual(await lint("import { redisAnswers } from './embedded-redis.js';\nexport const probe = redisAnswers;\n"), []);
  });
});
