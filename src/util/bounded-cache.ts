/**
 * A map that keeps at most `capacity` entries, dropping the least recently used first. For values that
 * are immutable and cheap to compute again: a dropped entry only costs that computation.
 */
export class BoundedCache<K, V> {
  // A Map iterates in insertion order: re-inserting an entry on use keeps the least recently used first.
  private readonly entries = new Map<K, V>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`a cache holds at least 1 entry, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as K);
  }

  /** Drops `key`'s entry, if held. */
  delete(key: K): void {
    this.entries.delete(key);
  }

  /** The value of `key`, computed by `compute` (and kept) when it is not held. */
  getOrCompute(key: K, compute: (key: K) => V): V {
    let value = this.get(key);
    if (value === undefined) {
      value = compute(key);
      this.set(key, value);
    }
    return value;
  }
}
