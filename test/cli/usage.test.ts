import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { oneLine, runCli } from '../support/cli.js';

/** Issue 19, finding 6: a bad command line is one line naming the problem and where to read more, exit 2. */
describe('a bad command line: one line and exit code 2, not the help', () => {
  const cases: Array<{ args: string[]; message: RegExp }> = [
    { args: ['status', '--jsn'], message: /^leasebeat: status: unknown option '--jsn' \(did you mean --json\?\); see leasebeat status --help$/ },
    { args: ['stats'], message: /^leasebeat: unknown command 'stats' \(did you mean status\?\); see leasebeat --help$/ },
    { args: ['trigger'], message: /^leasebeat: trigger: missing required argument 'job'; see leasebeat trigger --help$/ },
    { args: ['drain', 'worker-1', '--timeout'], message: /^leasebeat: drain: option '--timeout <duration>' argument missing; see leasebeat drain --help$/ },
  ];
  it('an unknown option, an unknown command, a missing argument or option value', async () => {
    const results = await Promise.all(cases.map(({ args }) => runCli(args)));
    results.forEach((result, i) => {
      const { args, message } = cases[i]!;
      assert.equal(result.code, 2, `${args.join(' ')}: exit ${result.code}\n${result.stderr}`);
      assert.match(oneLine(result), message);
      assert.equal(result.stdout, '', args.join(' '));
    });
  });

  it('--help and --version still print and exit 0', async () => {
    const [help, version] = await Promise.all([runCli(['status', '--help']), runCli(['--version'])]);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Usage: leasebeat status/);
    assert.equal(version.code, 0, version.stderr);
    assert.match(version.stdout, /^\d+\.\d+\.\d+/);
  });
});
