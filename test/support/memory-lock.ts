import { randomUUID } from 'node:crypto';
import { abortReason, type Clock } from '../../src/util/clock.js';
import { serializeRecord, type LeaderElectionRecord, type LockObservation, type LockVersion } from '../../src/election/record.js';
import { LockConflictError, LockNotFoundError, type LockFeedListener, type ResourceLock } from '../../src/election/resource-lock.js';

export type Verb = 'get' | 'create' | 'update';

/** One successful write to the store: its ground-truth history, in order. */
export interface MemoryWrite {
  identity: string;
  verb: 'create' | 'update' | 'put';
  record: LeaderElectionRecord;
  generation: string;
  version: number;
}

interface Hold {
  verb: Verb;
  identity: string;
  applied: () => void;
  release: Promise<void>;
}

/**
 * The shared object behind any number of `MemoryLock`s, in the role of client-go's fake clientset: it
 * records every call and every write, and lets a test inject failures, hangs and late replies per verb.
 */
export class MemoryLeaseStore {
  record: LeaderElectionRecord | undefined;
  version = 0;
  generation = '';
  readonly calls: Array<{ verb: Verb; identity: string }> = [];
  readonly writes: MemoryWrite[] = [];
  readonly events: string[] = [];
  private failures: Array<{ verb: Verb; error: Error }> = [];
  private hangs: Array<{ verb: Verb; identity: string | undefined; remaining: number }> = [];
  private holds: Hold[] = [];
  private lostReplies: Array<{ verb: Verb; identity: string; error: Error }> = [];
  private latency: { ms: number; clock: Clock } | undefined;
  private readonly feeds = new Set<LockFeedListener>();
  /** While true, changes are not delivered to feeds: lost notifications. */
  dropChanges = false;

  /** Writes the record as a third party would (bumping the version); `undefined` deletes it. */
  put(record: LeaderElectionRecord | undefined, identity = 'third-party', verb: MemoryWrite['verb'] = 'put'): void {
    if (record && !this.record) this.generation = randomUUID();
    this.record = record ? { ...record } : undefined;
    this.version++;
    if (record) this.writes.push({ identity, verb, record: { ...record }, generation: this.generation, version: this.version });
    if (!this.dropChanges) for (const feed of this.feeds) this.deliver(feed);
  }

  /** Subscribes a feed: it hears the record as it is now, then every change (in a later microtask, as off a wire). */
  subscribe(listener: LockFeedListener, signal: AbortSignal): void {
    this.feeds.add(listener);
    signal.addEventListener('abort', () => this.feeds.delete(listener), { once: true });
    this.deliver(listener);
    queueMicrotask(() => listener.live(true));
  }

  /** Reports every feed down (`false`) or back up (`true`, with the record as it is now). */
  setFeedsLive(live: boolean): void {
    for (const feed of this.feeds) {
      if (live) this.deliver(feed);
      queueMicrotask(() => feed.live(live));
    }
  }

  private deliver(feed: LockFeedListener): void {
    const record = this.record;
    if (!record) return;
    const observation = { record: { ...record }, raw: serializeRecord(record), version: new MemoryVersion(this.generation, this.version) };
    queueMicrotask(() => feed.change(observation));
  }

  failNext(verb: Verb, error: Error): void {
    this.failures.push({ verb, error });
  }

  /** The next `count` calls of `verb` by `identity` take effect and then fail: a reply lost on the wire. */
  failAfterApplying(verb: Verb, identity: string, error: Error, count = 1): void {
    for (let i = 0; i < count; i++) this.lostReplies.push({ verb, identity, error });
  }

  /** Holds the next `count` calls of `verb` (by `identity`, or by anyone) open until their signal aborts. */
  hang(verb: Verb, count = Infinity, identity?: string): void {
    this.hangs.push({ verb, identity, remaining: count });
  }

  /**
   * Lets the next `verb` call by `identity` take effect, then holds its reply back: a reply on the wire
   * while its process is frozen. Resolves once the call has taken effect; call the returned function
   * to deliver the reply (late).
   */
  holdReply(verb: Verb, identity: string): Promise<() => void> {
    let deliver!: () => void;
    const release = new Promise<void>((resolve) => (deliver = resolve));
    return new Promise((resolve) => this.holds.push({ verb, identity, release, applied: () => resolve(deliver) }));
  }

  /** Drops every injected failure and hang still waiting to be used (calls already hanging stay hung). */
  clearFaults(): void {
    this.failures = [];
    this.hangs = [];
  }

  /** Makes every call take `ms` on `clock` before it takes effect (a slow API server); 0 turns it off. */
  setLatency(ms: number, clock: Clock): void {
    this.latency = ms > 0 ? { ms, clock } : undefined;
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
    if (this.latency) await this.latency.clock.sleep(this.latency.ms, signal);
    const hang = this.hangs.find((h) => h.verb === verb && h.remaining > 0 && (h.identity === undefined || h.identity === identity));
    if (hang) {
      hang.remaining--;
      await new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(abortReason(signal)), { once: true }));
    }
    const index = this.failures.findIndex((f) => f.verb === verb);
    if (index >= 0) {
      const [failure] = this.failures.splice(index, 1);
      throw failure!.error;
    }
  }

  /** Called once a call took effect: delays its reply if a test holds it. */
  async reply(verb: Verb, identity: string): Promise<void> {
    const lost = this.lostReplies.findIndex((l) => l.verb === verb && l.identity === identity);
    if (lost >= 0) throw this.lostReplies.splice(lost, 1)[0]!.error;
    const index = this.holds.findIndex((h) => h.verb === verb && h.identity === identity);
    if (index < 0) return;
    const [hold] = this.holds.splice(index, 1);
    hold!.applied();
    await hold!.release;
  }
}

class MemoryVersion implements LockVersion {
  constructor(
    readonly generation: string,
    readonly version: number,
  ) {}
}

/**
 * A `ResourceLock` over a `MemoryLeaseStore`, with the same compare-and-swap rules as the real locks, and
 * (with `feed`) a change feed like the Kubernetes watch or the Redis notifications.
 */
export class MemoryLock implements ResourceLock {
  readonly watch?: (signal: AbortSignal, listener: LockFeedListener) => void;

  constructor(
    readonly store: MemoryLeaseStore,
    private readonly holder: string,
    options: { feed?: boolean } = {},
  ) {
    if (options.feed) this.watch = (signal, listener) => this.store.subscribe(listener, signal);
  }

  async get(signal: AbortSignal): Promise<LockObservation> {
    await this.store.enter('get', this.holder, signal);
    const record = this.store.record;
    if (!record) throw new LockNotFoundError('not found');
    const version = new MemoryVersion(this.store.generation, this.store.version);
    await this.store.reply('get', this.holder);
    return { record: { ...record }, raw: serializeRecord(record), version };
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<LockVersion> {
    await this.store.enter('create', this.holder, signal);
    if (this.store.record) throw new LockConflictError('already exists');
    this.store.put(record, this.holder, 'create');
    const version = new MemoryVersion(this.store.generation, this.store.version);
    await this.store.reply('create', this.holder);
    return version;
  }

  async update(record: LeaderElectionRecord, base: LockVersion, signal: AbortSignal): Promise<LockVersion> {
    await this.store.enter('update', this.holder, signal);
    if (!(base instanceof MemoryVersion)) throw new TypeError('update based on a foreign version');
    if (!this.store.record) throw new LockNotFoundError('not found');
    if (this.store.version !== base.version || this.store.generation !== base.generation) {
      throw new LockConflictError('conflict');
    }
    this.store.put(record, this.holder, 'update');
    const version = new MemoryVersion(this.store.generation, this.store.version);
    await this.store.reply('update', this.holder);
    return version;
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
}
