import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import * as codes from '../../src/ledger/script-codes.js';
import { ScriptProtocolError, scriptCode } from '../../src/ledger/script-codes.js';

/** Every table of named return codes the Lua scripts answer with (script-codes.ts exports them all). */
const TABLES = (Object.entries(codes) as Array<[string, unknown]>).filter((entry): entry is [string, Record<string, number>] => {
  const [, value] = entry;
  return typeof value === 'object' && value !== null && Object.values(value).every((code) => typeof code === 'number');
});

const src = new URL('../../src/', import.meta.url).pathname;

/**
 * Scripts that answer data, not a code: a count, rows, a best-effort take-back whose answer is only
 * logged, or a count of failed runs with whether this one paused the job.
 */
const ANSWER_DATA = new Set(['pruneLedger', 'takeOver', 'abandonStart', 'countFailedRun']);

describe('script return codes: named, and an unknown one is an error', () => {
  it('every Lua script that answers a code has it decoded by scriptCode, under its own name', () => {
    const callers = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((path) => path.endsWith('.ts'))
      .map((path) => readFileSync(`${src}${path}`, 'utf8'))
      .join('\n');
    const scripts = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((path) => /(ledger|producing|workers)\/lua\/[A-Za-z]+\.lua$/.test(path))
      .map((path) => path.replace(/^.*\/([A-Za-z]+)\.lua$/, '$1'));
    assert.ok(scripts.length >= 18, `scripts: ${scripts.join(', ')}`);
    const undecoded = scripts.filter((name) => !ANSWER_DATA.has(name) && !new RegExp(`scriptCode\\(\\s*'${name}'`).test(callers));
    assert.deepEqual(undecoded, []);
  });

  it('finds every code table', () => {
    assert.ok(TABLES.length >= 14, `code tables: ${TABLES.map(([name]) => name).join(', ')}`);
  });

  for (const [name, table] of TABLES) {
    it(`${name}: each known code reads as itself (as a number or as Redis' string), anything else is a ScriptProtocolError`, () => {
      for (const code of Object.values(table)) {
        assert.equal(scriptCode(name, table, code), code);
        assert.equal(scriptCode(name, table, String(code)), code, 'a code inside a string reply');
      }
      const unknown = Math.max(...Object.values<number>(table)) + 1;
      for (const reply of [unknown, -99, null, undefined, '', 'fenced']) {
        assert.throws(
          () => scriptCode(name, table, reply),
          (error: unknown) => error instanceof ScriptProtocolError && error.script === name && error.code === reply,
          `${name} answering ${JSON.stringify(reply)}`,
        );
      }
    });
  }
});
