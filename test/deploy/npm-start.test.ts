import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { useRedis } from '../support/redis-server.js';
import { alive } from '../support/process.js';
import { until } from '../support/until.js';

const root = new URL('../../', import.meta.url).pathname;
const goodJobs = new URL('../fixtures/jobs-good/', import.meta.url).pathname;

describe('npm start under a process manager', () => {
  const redis = useRedis();

  it('SIGTERM to npm reaches leasebeat, which shuts down gracefully', { timeout: 120_000 }, async () => {
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: root,
      env: { ...process.env, LEASEBEAT_REDIS_URL: redis.server.url, LEASEBEAT_JOBS_DIR: goodJobs, LEASEBEAT_HTTP_PORT: '0', LEASEBEAT_PREFIX: 'npm-start', LEASEBEAT_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: Array<{ pid?: number; msg?: string }> = [];
    let outputEnded = false;
    npm.stdout.once('close', () => (outputEnded = true));
    createInterface({ input: npm.stdout }).on('line', (text) => {
      try {
        lines.push(JSON.parse(text) as { pid?: number; msg?: string });
      } catch {
        // npm's own output
      }
    });
    let pid: number | undefined;
    try {
      const serving = await until('leasebeat to serve', () => lines.find((line) => line.msg === 'serving status, probes, metrics and Bull Board'), 60_000);
      pid = serving.pid!;
      assert.notEqual(pid, npm.pid, 'leasebeat runs under npm');
      npm.kill('SIGTERM');
      // Its last lines pass through npm's pipe after it exited: read them all before looking.
      await until('the leasebeat process to exit and its output to end', () => (!alive(pid!) && outputEnded) || undefined, 60_000);
      assert.ok(lines.some((line) => line.msg === 'shut down'), `it shut down gracefully; its last lines: ${lines.filter((line) => line.msg !== 'tick skipped').slice(-12).map((line) => line.msg).join(' | ')}`);
    } finally {
      if (pid !== undefined && alive(pid)) process.kill(pid, 'SIGKILL');
      if (npm.exitCode === null && npm.signalCode === null) npm.kill('SIGKILL');
    }
  });
});
