import { randomUUID } from 'node:crypto';
import { abortReason } from '../../src/util/clock.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation } from '../../src/election/record.js';
import { LockConflictError, LockNotFoundError, type ResourceLock } from '../../src/election/resource-lock.js';

export type Verb = 'get' | 'create' | 'update';

/**
 * The shared object behind any number of `MemoryLock`s, in the role of client-go's fake clientset: it
 * records every call and lets a test inject failures and hangs per verb.
 */
export class MemoryLeaseStore {
  record: LeaderElectionRecord | undefined;
  version = 0;
  generation = '';
  readonly calls: Array<{ verb: Verb; identity: string }> = [];
  readonly events: string[] = [];
  private failures: Array<{ verb: Verb; error: Error }> = [];
  private hangs = new Map<Verb, number>();

  /** Writes the record as a third party would (bumping the version); `undefined` deletes it. */
  put(record: LeaderElectionRecord | undefined): void {
    if (record && !this.record) this.generation = randomUUID();
    this.record = record ? { ...record } : undefined;
    this.version++;
  }

  failNext(verb: Verb, error: Error): void {
    this.failures.push({ verb, error });
  }

  /** Holds the next `count` calls of `verb` (default: all of them) open until their signal aborts. */
  hang(verb: Verb, count = Infinity): void {
    this.hangs.set(verb, count);
  }

  verbs(): Verb[] {
    return this.calls.map((c) => c.verb);
  }

  resetCalls(): void {
    this.calls.length = 0;
  }

  /** Applies a call's bookkeeping; resolves after hangs and injected failures are dealt with. */
  async enter(verb: Verb, identity: string, signal: AbortSignal): Promise<void> {
    this.calls.push({ verb, identity });
    if (signal.aborted) throw abortReason(signal);
    const hangs = this.hangs.get(verb) ?? 0;
    if (hangs > 0) {
      this.hangs.set(verb, hangs - 1);
      await new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(abortReason(signal)), { once: true }));
    }
    const index = this.failures.findIndex((f) => f.verb === verb);
    if (index >= 0) {
      const [failure] = this.failures.splice(index, 1);
      throw failure!.error;
    }
  }
}

/** A `ResourceLock` over a `MemoryLeaseStore`, with the same compare-and-swap rules as the real locks. */
export class MemoryLock implements ResourceLock {
  private observedVersion: number | undefined;
  private observedGeneration = '';

  constructor(
    readonly store: MemoryLeaseStore,
    private readonly holder: string,
  ) {}

  async get(signal: AbortSignal): Promise<LockObservation> {
    await this.store.enter('get', this.holder, signal);
    const record = this.store.record;
    if (!record) throw new LockNotFoundError('not found');
    this.observedVersion = this.store.version;
    this.observedGeneration = this.store.generation;
    return { record: { ...record }, raw: serializeRecord(record) };
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    await this.store.enter('create', this.holder, signal);
    if (this.store.record) throw new LockConflictError('already exists');
    this.store.put(record);
    this.observedVersion = this.store.version;
    this.observedGeneration = this.store.generation;
  }

  async update(record: LeaderElectionRecord, signal: AbortSignal): Promise<void> {
    await this.store.enter('update', this.holder, signal);
    if (this.observedVersion === undefined) throw new Error('update before observation');
    if (!this.store.record) throw new LockNotFoundError('not found');
    if (this.store.version !== this.observedVersion || this.store.generation !== this.observedGeneration) {
      throw new LockConflictError('conflict');
    }
    this.store.put(record);
    this.observedVersion = this.store.version;
  }

  recordEvent(message: string): void {
    this.store.events.push(message);
  }

  identity(): string {
    return this.holder;
  }

  describe(): string {
    return 'memory/test';
  }

  generation(): string {
    return this.observedGeneration;
  }
}
