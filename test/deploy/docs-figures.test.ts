/**
 * The failover figures docs/deployment.md quotes are the ones docs/benchmarks.md (written by `npm run
 * bench`) measured, and its bounds are those of docs/guarantees.md. When the bench runs again and its figures
 * change, this fails until the deployment page quotes the new ones.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';

const repoRoot = resolve(import.meta.dirname, '../..');
const read = (path: string): string => readFileSync(join(repoRoot, path), 'utf8');
const flat = (text: string): string => text.replace(/\s+/g, ' ');

/** The bench's generated table, between its markers. */
const benchTable = (() => {
  const text = read('docs/benchmarks.md');
  const start = text.indexOf('<!-- bench:start -->');
  const end = text.indexOf('<!-- bench:end -->');
  assert.ok(start >= 0 && end > start, 'benchmarks.md has no bench:start … bench:end table');
  return text.slice(start, end).split('\n').filter((line) => line.startsWith('| '));
})();

function benchRow(...words: string[]): string {
  const rows = benchTable.filter((row) => words.every((word) => row.includes(word)));
  assert.equal(rows.length, 1, `benchmarks.md rows with ${words.join(', ')}: ${rows.length}`);
  return rows[0] ?? '';
}

/** "a / b / c ms" of a bench row's measurement column. */
function triple(row: string): string {
  const match = /(\d+) \/ (\d+) \/ (\d+) ms/.exec(row.split('|')[3] ?? '');
  assert.ok(match, `no min / median / p99 in ${row}`);
  return `${match[1]} / ${match[2]} / ${match[3]} ms`;
}

const failover = flat((() => {
  const text = read('docs/deployment.md');
  const start = text.indexOf('## Lease timings and failover');
  assert.ok(start >= 0, 'deployment.md has no "Lease timings and failover" section');
  return text.slice(start, text.indexOf('\n## ', start + 1));
})());

describe('docs/deployment.md quotes the failover measurements of docs/benchmarks.md', () => {
  it('graceful stop: release → next leader among 20 candidates, and SIGTERM → first enqueue', () => {
    const graceful = /\*\*Graceful stop of the leader:\*\*(.*?)- \*\*Crash/.exec(failover)?.[1] ?? '';
    assert.ok(graceful, 'no graceful-stop bullet');
    for (const row of [
      benchRow('20 candidates, redis lock'),
      benchRow('20 candidates, kubernetes lock'),
      benchRow('Failover, redis lock, release'),
      benchRow('Failover, kubernetes lock, release'),
    ]) {
      // The candidates rows write "7 / 8 / 21 ms;" in the same form as the failover rows.
      assert.ok(graceful.includes(triple(row).replace(/ ms$/, '')), `the graceful-stop bullet does not quote ${triple(row)}`);
    }
    assert.match(graceful, /min\(20 ms, RetryPeriod \/ 10\)/, 'the release bound');
  });

  it('crash: SIGKILL per lock, and the SIGSTOP range over both locks', () => {
    const crash = /\*\*Crash of the leader[^*]*:\*\*(.*?)- \*\*Leader cut off/.exec(failover)?.[1] ?? '';
    assert.ok(crash, 'no crash bullet');
    for (const lock of ['redis', 'kubernetes']) {
      const figures = triple(benchRow(`Failover, ${lock} lock, crash`));
      assert.ok(crash.includes(figures), `the crash bullet does not quote ${lock}'s ${figures}`);
    }
    const silent = ['redis', 'kubernetes'].map((lock) => triple(benchRow(`Failover, ${lock} lock, silent leader`)).match(/\d+/g)!.map(Number));
    const range = `${Math.min(...silent.map((s) => s[0]!))}–${Math.max(...silent.map((s) => s[2]!))} ms`;
    assert.ok(crash.includes(range), `the crash bullet does not quote the SIGSTOP range ${range}`);
    assert.match(crash, /LeaseDuration \+ 5 ms after the last renewal/, 'the crash bound');
  });

  it('the bounds are those of docs/guarantees.md', () => {
    const guarantees = flat(read('docs/guarantees.md'));
    assert.match(guarantees, /replaced within LeaseDuration \+ 5 ms after the last renewal a follower saw/);
    assert.match(guarantees, /at most min\(20 ms, RetryPeriod \/ 10\)\) plus one write/);
    assert.match(guarantees, /without a live feed: within LeaseDuration \+ 2\.2 × RetryPeriod/);
  });

  it('the bench timings the page names are the bench\'s', () => {
    const header = read('docs/benchmarks.md');
    assert.match(header, /LeaseDuration 2000 ms, RenewDeadline 1500 ms, RetryPeriod 250 ms/);
    assert.match(failover, /with a 2 s lease, 1\.5 s renew deadline and 250 ms retry period/);
  });
});
