import type { ServerResponse } from 'node:http';

/** A Lease as a watch event carries it: enough of the apiserver's object for client-node and the lock. */
export interface WatchedLease {
  apiVersion: 'coordination.k8s.io/v1';
  kind: 'Lease';
  metadata: { name: string; namespace: string; uid: string; resourceVersion: string };
  spec: Record<string, unknown>;
}

/** One change as the watch cache keeps it. */
export interface WatchChange {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: WatchedLease;
}

interface Watcher {
  res: ServerResponse;
  namespace: string;
  /** From `fieldSelector=metadata.name=<name>`; undefined watches the whole namespace. */
  name: string | undefined;
  bookmarks: boolean;
  timer: NodeJS.Timeout | undefined;
}

/** How often a watcher that asked for bookmarks gets one; the apiserver sends them about once a minute. */
const DEFAULT_BOOKMARK_INTERVAL_MS = 1_000;

/**
 * The watch side of the fake apiserver: a cache of changes by resourceVersion and the open watch
 * streams, with the apiserver's rules that matter to a client:
 * - `resourceVersion` unset or "0": the current objects as ADDED, then changes;
 * - a resourceVersion still in the cache: every later change, replayed in order, then live ones;
 * - an older one (compacted away): a single `ERROR` event with a 410 `Expired` Status, then the end;
 * - `allowWatchBookmarks=true`: BOOKMARK events carrying the newest resourceVersion;
 * - `timeoutSeconds`: the stream ends after that long, as the apiserver ends every watch sooner or later.
 * Tests can end every open stream at once (a dropped watch) and compact the cache.
 */
export class LeaseWatchHub {
  private readonly changes: Array<{ resourceVersion: number; change: WatchChange }> = [];
  /** The oldest resourceVersion a watch may resume from; older ones get 410. */
  private compactedThrough = 0;
  private readonly watchers = new Set<Watcher>();
  bookmarkIntervalMs = DEFAULT_BOOKMARK_INTERVAL_MS;

  /** Open watch streams right now. */
  get open(): number {
    return this.watchers.size;
  }

  /** Records a change and sends it to every matching watcher. */
  publish(change: WatchChange): void {
    this.changes.push({ resourceVersion: Number(change.object.metadata.resourceVersion), change });
    for (const watcher of this.watchers) if (matches(watcher, change.object)) send(watcher.res, change);
  }

  /** Forgets every change up to the newest resourceVersion: resuming from any of them answers 410. */
  compact(throughResourceVersion: number): void {
    this.compactedThrough = throughResourceVersion;
  }

  /** Ends every open watch stream, as a restarting apiserver or a dropped connection would. */
  dropAll(): void {
    for (const watcher of [...this.watchers]) this.end(watcher);
  }

  /**
   * Serves one watch request. `current` are the objects as they are now, `revision` the newest
   * resourceVersion, for a watch that starts without one.
   */
  serve(res: ServerResponse, namespace: string, query: URLSearchParams, current: WatchedLease[], revision: number): void {
    const selector = query.get('fieldSelector') ?? '';
    const name = /^metadata\.name=(.+)$/.exec(selector)?.[1];
    const watcher: Watcher = { res, namespace, name, bookmarks: query.get('allowWatchBookmarks') === 'true', timer: undefined };
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // The apiserver answers a watch at once, before any event: the client learns the stream is open.
    res.flushHeaders();
    const from = query.get('resourceVersion');
    if (from === null || from === '' || from === '0') {
      for (const object of current) if (matches(watcher, object)) send(res, { type: 'ADDED', object });
    } else if (Number(from) < this.compactedThrough) {
      const message = `too old resource version: ${from} (${revision})`;
      send(res, { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'Expired', code: 410 } });
      res.end();
      return;
    } else {
      for (const { resourceVersion, change } of this.changes) {
        if (resourceVersion > Number(from) && matches(watcher, change.object)) send(res, change);
      }
    }
    this.watchers.add(watcher);
    res.once('close', () => this.end(watcher));
    if (watcher.bookmarks) {
      watcher.timer = setInterval(() => {
        const newest = this.changes.at(-1)?.resourceVersion ?? revision;
        send(res, { type: 'BOOKMARK', object: { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', metadata: { resourceVersion: String(newest) } } });
      }, this.bookmarkIntervalMs);
    }
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? 0);
    if (timeoutSeconds > 0) setTimeout(() => this.end(watcher), timeoutSeconds * 1000).unref();
  }

  private end(watcher: Watcher): void {
    if (!this.watchers.delete(watcher)) return;
    clearInterval(watcher.timer);
    if (!watcher.res.writableEnded) watcher.res.end();
  }
}

function matches(watcher: Watcher, object: WatchedLease): boolean {
  return object.metadata.namespace === watcher.namespace && (watcher.name === undefined || object.metadata.name === watcher.name);
}

function send(res: ServerResponse, event: { type: string; object: unknown }): void {
  if (!res.writableEnded) res.write(`${JSON.stringify(event)}\n`);
}
