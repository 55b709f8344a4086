import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedCache } from '../../src/util/bounded-cache.js';

describe('BoundedCache: at most `capacity` entries, the least recently used dropped first', () => {
  it('never holds more than its capacity', () => {
    const cache = new BoundedCache<number, string>(3);
    for (let i = 0; i < 10; i++) cache.set(i, `v${i}`);
    assert.equal(cache.size, 3);
    assert.deepEqual([7, 8, 9].map((i) => cache.get(i)), ['v7', 'v8', 'v9']);
    assert.equal(cache.get(6), undefined);
  });

  it('keeps an entry that was read over older ones', () => {
    const cache = new BoundedCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.get('a');
    cache.set('c', 3);
    assert.equal(cache.get('a'), 1);
    assert.equal(cache.get('b'), undefined, 'b was the least recently used');
  });

  it('computes a missing value once, and again only after it was dropped', () => {
    const cache = new BoundedCache<number, number>(2);
    let computed = 0;
    const square = (n: number): number => (computed++, n * n);
    assert.equal(cache.getOrCompute(3, square), 9);
    assert.equal(cache.getOrCompute(3, square), 9);
    assert.equal(computed, 1);
    cache.getOrCompute(4, square);
    cache.getOrCompute(5, square);
    assert.equal(cache.getOrCompute(3, square), 9);
    assert.equal(computed, 4);
  });

  it('drops an entry on request, making room for another', () => {
    const cache = new BoundedCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.delete('a');
    cache.set('c', 3);
    assert.equal(cache.size, 2);
    assert.deepEqual([cache.get('a'), cache.get('b'), cache.get('c')], [undefined, 2, 3]);
  });

  it('refuses a capacity below 1', () => {
    assert.throws(() => new BoundedCache(0), RangeError);
  });
});
