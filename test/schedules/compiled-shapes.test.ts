import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ScheduledJob } from '../../src/scheduling/define-job.js';
import { CompiledShapes, isPlainJson, isPlainRecord, SHAPES_PER_TYPE } from '../../src/schedules/compiled-shapes.js';
import { scheduledJob } from '../support/scheduled-job.js';

const handler = (): undefined => undefined;
const jobType = (): ScheduledJob => ({ ...scheduledJob({ name: 'send-report', handler }), trigger: { kind: 'none' } });

describe('CompiledShapes: bounded per job type', () => {
  it('keeps at most SHAPES_PER_TYPE shapes of a type, the oldest out first', () => {
    const shapes = new CompiledShapes();
    const type = jobType();
    const compiled = scheduledJob({ name: 'compiled', every: '1h', handler });
    for (let i = 0; i <= SHAPES_PER_TYPE; i++) shapes.set(type, `shape-${i}`, compiled);
    assert.equal(shapes.get(type, 'shape-0'), undefined);
    assert.equal(shapes.get(type, 'shape-1'), compiled);
    assert.equal(shapes.get(type, `shape-${SHAPES_PER_TYPE}`), compiled);
  });

  it('keeps no very long shape, and none across job type objects', () => {
    const shapes = new CompiledShapes();
    const [type, reloaded] = [jobType(), jobType()];
    const compiled = scheduledJob({ name: 'compiled', every: '1h', handler });
    shapes.set(type, 'x'.repeat(10_000), compiled);
    assert.equal(shapes.get(type, 'x'.repeat(10_000)), undefined);
    shapes.set(type, 'short', compiled);
    assert.equal(shapes.get(type, 'short'), compiled);
    assert.equal(shapes.get(reloaded, 'short'), undefined);
  });
});

describe('isPlainJson: what the full check would accept as data, false when in doubt', () => {
  it('plain data', () => {
    for (const value of [null, 'text', 0, -1.5, true, [], {}, [1, 'a', null, { b: [false] }], Object.assign(Object.create(null) as object, { a: 1 })]) {
      assert.equal(isPlainJson(value), true, JSON.stringify(value));
    }
  });

  it('anything JSON would change or refuse, or that is too deep to be sure of', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    const holes: unknown[] = [];
    holes[2] = 3;
    for (const value of [undefined, NaN, Infinity, 5n, Symbol('s'), () => 1, new Date(0), new Map(), { a: undefined }, holes, cyclic, deep, { [Symbol('s')]: 1 }]) {
      assert.equal(isPlainJson(value), false, String(typeof value));
    }
  });

  it('isPlainRecord: object literals and prototype-less objects only', () => {
    assert.equal(isPlainRecord({ a: 1 }), true);
    assert.equal(isPlainRecord(Object.create(null)), true);
    for (const value of [null, [], new Date(0), new (class Spec {})(), 'text', { [Symbol('s')]: 1 }]) assert.equal(isPlainRecord(value), false);
  });
});
