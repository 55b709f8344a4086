import { after, before } from 'node:test';

/** A resource of the calling suite, from {@link useSuiteResource}. */
export interface SuiteResource<T> {
  /** The resource, there from the suite's `before` hooks on (the one that starts it runs first). */
  readonly current: T;
  /**
   * Runs `close` after the suite, before the resource closes; the last one added runs first. For what
   * holds a connection to it (queues, producers, instances), which would otherwise be closed after it is
   * gone: `after` hooks run in the order they are added.
   */
  beforeClose(close: () => unknown): void;
}

/** Starts a resource for the calling suite in a `before` hook and closes it in an `after` hook. */
export function useSuiteResource<T>(what: string, start: () => Promise<T>, close: (resource: T) => Promise<unknown>): SuiteResource<T> {
  let started: { resource: T } | undefined;
  const closers: Array<() => unknown> = [];
  before(async () => {
    started = { resource: await start() };
  });
  after(async () => {
    for (const closer of closers.reverse()) await closer();
    if (started) await close(started.resource);
  });
  return {
    get current(): T {
      if (!started) throw new Error(`${what} starts in the suite's before hook: use it from a hook or a test`);
      return started.resource;
    },
    beforeClose(closer: () => unknown): void {
      closers.push(closer);
    },
  };
}
