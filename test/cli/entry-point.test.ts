import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';

const repoRoot = resolve(import.meta.dirname, '../..');

/**
 * A tree laid out like a checkout (or, without tsconfig.json, an installed package) whose two entry
 * points only say which of them ran: bin/leasebeat.js is the real one.
 */
function tree(options: { checkout: boolean }): string {
  const dir = mkdtempSync(join(tmpdir(), 'leasebeat-entry-'));
  mkdirSync(join(dir, 'bin'));
  copyFileSync(join(repoRoot, 'bin/leasebeat.js'), join(dir, 'bin/leasebeat.js'));
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  if (options.checkout) writeFileSync(join(dir, 'tsconfig.json'), '{}\n');
  mkdirSync(join(dir, 'src/cli'), { recursive: true });
  writeFileSync(join(dir, 'src/cli/main.ts'), "const from: string = 'sources'; console.log(from);\n");
  writeFileSync(join(dir, 'src/cli/rules.lua'), 'return 1\n');
  mkdirSync(join(dir, 'dist/cli'), { recursive: true });
  writeFileSync(join(dir, 'dist/cli/main.js'), "console.log('dist');\n");
  return dir;
}

/** Dates `path` `secondsAgo` in the past, so that the order of writes does not hang on the clock's grain. */
const age = (path: string, secondsAgo: number): void => {
  const at = new Date(Date.now() - secondsAgo * 1000);
  utimesSync(path, at, at);
};

const ran = async (dir: string): Promise<string> => (await promisify(execFile)(process.execPath, [join(dir, 'bin/leasebeat.js')])).stdout.trim();

void describe('bin/leasebeat.js runs dist/ when it is current, else the sources through tsx', () => {
  const made: string[] = [];
  const fresh = (options: { checkout: boolean }): string => {
    const dir = tree(options);
    made.push(dir);
    return dir;
  };
  after(() => made.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  void it('a checkout built after its last edit runs dist/', async () => {
    const dir = fresh({ checkout: true });
    for (const file of ['src/cli/main.ts', 'src/cli/rules.lua']) age(join(dir, file), 60);
    writeFileSync(join(dir, 'dist/.built'), '');
    assert.equal(await ran(dir), 'dist');
  });

  void it('an edit after the build, of code or of a Lua script, runs the sources', async () => {
    for (const edited of ['src/cli/main.ts', 'src/cli/rules.lua']) {
      const dir = fresh({ checkout: true });
      for (const file of ['src/cli/main.ts', 'src/cli/rules.lua']) age(join(dir, file), 120);
      writeFileSync(join(dir, 'dist/.built'), '');
      age(join(dir, 'dist/.built'), 60);
      age(join(dir, edited), 0);
      assert.equal(await ran(dir), 'sources', `after an edit of ${edited}`);
    }
  });

  void it('a checkout never built (no dist/.built) runs the sources; an installed package runs dist/', async () => {
    assert.equal(await ran(fresh({ checkout: true })), 'sources');
    assert.equal(await ran(fresh({ checkout: false })), 'dist');
  });
});
