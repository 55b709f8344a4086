import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { useRedis } from '../support/redis-server.js';

const root = new URL('../../', import.meta.url).pathname;

/** The README's shell lines that write a runtime schedule, as a reader copies them. */
const upsertLines = readFileSync(new URL('README.md', `file://${root}`), 'utf8')
  .split('\n')
  .filter((line) => /^npx leasebeat schedules upsert /.test(line));

describe("the README's runtime-schedule example, on a fresh clone's jobs folder", () => {
  const redis = useRedis();

  it('runs as written, in the checkout, and stores the schedule', { timeout: 120_000 }, async () => {
    assert.ok(upsertLines.length > 0, 'the README shows a schedules upsert');
    const env = { ...process.env, LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_PREFIX: 'readme' };
    for (const line of upsertLines) {
      // As a reader runs it: by a shell, from the checkout's root (its default jobs folder), npx finding the bin.
      const { stdout } = await promisify(execFile)('sh', ['-c', line], { cwd: root, env, timeout: 60_000 });
      assert.match(stdout, new RegExp(`^upserted ${/upsert (\S+)/.exec(line)![1]!.replace(/\./g, '\\.')} version 1\n$`));
    }
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/leasebeat.js', 'schedules', 'ls', '--json'], { cwd: root, env });
    assert.deepEqual(
      (JSON.parse(stdout) as { schedules: Array<{ id: string }> }).schedules.map((s) => s.id),
      upsertLines.map((line) => /upsert (\S+)/.exec(line)![1]),
    );
  });
});
