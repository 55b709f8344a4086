import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffMs } from '../../src/util/backoff.js';

describe('backoffMs', () => {
  it('doubles from the initial delay with each attempt, and stops at the maximum', () => {
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((attempt) => backoffMs(attempt, 250, 5_000)), [250, 500, 1_000, 2_000, 4_000, 5_000]);
    assert.equal(backoffMs(60, 250, 5_000), 5_000, 'no overflow past the maximum');
  });
});
