import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { definitionHash } from '../../src/scheduling/definition-hash.js';
import { compileSchedule } from '../../src/schedules/spec.js';
import { jobType, scheduledJob } from '../support/scheduled-job.js';

describe('definitionHash: the content hash stamped on every run', () => {
  const report = (): string => 'report';

  it('is the same for the same content, whatever its key order or the file it was read from', () => {
    const a = scheduledJob({ name: 'nightly', schedule: '0 3 * * *', data: { tenant: 1, format: 'pdf' }, handler: report });
    const b = { ...scheduledJob({ name: 'nightly', schedule: '0 3 * * *', data: { format: 'pdf', tenant: 1 }, handler: report }), file: '/elsewhere/nightly.ts' };
    assert.match(definitionHash(a), /^sha256:[0-9a-f]{16}$/);
    assert.equal(definitionHash(a), definitionHash(b));
  });

  it('changes with the schedule, the data, an option or the handler source', () => {
    const base = { name: 'nightly', schedule: '0 3 * * *', data: { tenant: 1 }, handler: report };
    const hashes = [
      definitionHash(scheduledJob(base)),
      definitionHash(scheduledJob({ ...base, schedule: '0 4 * * *' })),
      definitionHash(scheduledJob({ ...base, data: { tenant: 2 } })),
      definitionHash(scheduledJob({ ...base, overlap: 'skip' })),
      definitionHash(scheduledJob({ ...base, handler: () => 'another report' })),
    ];
    assert.equal(new Set(hashes).size, hashes.length, `every edit gives a new hash: ${hashes.join(', ')}`);
  });

  it("a runtime schedule's hash follows its spec, not when its version was written", () => {
    const types = new Map([['send-report', jobType('send-report', report)]]);
    const compiled = (spec: Record<string, unknown>, updatedAt: number) => {
      const result = compileSchedule('tenant-1', { job: 'send-report', ...spec }, types.get('send-report'), 1_000, updatedAt);
      assert.ok(result.ok, JSON.stringify(result));
      return result.job;
    };
    assert.equal(definitionHash(compiled({ every: '1m' }, 2_000)), definitionHash(compiled({ every: '1m' }, 9_000)));
    assert.notEqual(definitionHash(compiled({ every: '1m' }, 2_000)), definitionHash(compiled({ every: '2m' }, 2_000)));
  });
});
