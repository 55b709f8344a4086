import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { once } from 'node:events';

const binary = resolve(import.meta.dirname, '../../bin/leasebeat.js');

/**
 * Runs the CLI with its stdout in a pipe that nobody reads until the CLI has written nearly all it has to
 * say (its first line on stderr), as a busy `| jq` would: the pipe holds 64 KiB, the CLI's stream queues
 * the rest, and only then does the reader start.
 */
async function readLate(args: string[]): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(process.execPath, [binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pause();
  const exited = once(child, 'exit') as Promise<[number | null]>;
  await once(child.stderr, 'data');
  const chunks: Buffer[] = [];
  for await (const chunk of child.stdout) chunks.push(chunk as Buffer);
  const [code] = await exited;
  return { code, stdout: Buffer.concat(chunks).toString('utf8') };
}

void describe('CLI output in a pipe', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-pipe-'));
    await writeFile(join(dir, 'each-second.mjs'), 'export default { name: "each-second", schedule: "* * * * * *", handler: () => undefined };\n');
    // Its warning goes to stderr after every tick is written to stdout: the cue for the late reader.
    await writeFile(join(dir, 'with-warning.mjs'), 'export default { name: "with-warning", schedule: "? * * * * *", handler: () => undefined };\n');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  void it('arrives whole, far past the 64 KiB a pipe holds, before the process exits', { timeout: 60_000 }, async () => {
    const count = 20_000;
    const { code, stdout } = await readLate(['validate', dir, '--count', String(count)]);
    assert.equal(code, 0);
    assert.ok(stdout.length > 256 * 1024, `${stdout.length} bytes: the check needs more than a pipe's buffer`);
    const lines = stdout.trimEnd().split('\n');
    assert.equal(lines.length, 2 * (count + 1) + 1, 'each job line, every tick, and the summary');
    assert.equal(lines.at(-1), '2 job(s) valid, 0 error(s), 1 warning(s)');
  });
});
