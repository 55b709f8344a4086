import type { Logger } from 'pino';
import { parseRunStop, type RunStopRequest } from '../ledger/run-stops.js';
import type { KeySpace } from '../redis/keys.js';
import type { RedisClient } from '../redis/redis-topology.js';
import { ownConnection } from '../util/stay-connected.js';

/** What a worker pool needs to hear of the stops leaders ask of runs (overlap `cancelOther`, `terminateOther`). */
export interface RunStops {
  /** The stop asked of run `jobId`, if any: a run asked to stop before it started never starts. */
  requested(jobId: string): Promise<RunStopRequest | undefined>;
  /**
   * Listens until `signal` aborts: `request` for each stop published from now on, and `resubscribed` each
   * time the feed (re)connects, since a request published while it was down is not delivered again.
   */
  listen(signal: AbortSignal, listener: { request(request: RunStopRequest): void; resubscribed(): void }): void;
}

/** The stop requests on Redis: a key per run (see requestRunStop.lua) and a pub/sub channel, on a subscriber connection of its own. */
export class RunStopFeed implements RunStops {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly log: Logger,
  ) {}

  async requested(jobId: string): Promise<RunStopRequest | undefined> {
    return parseRunStop(await this.redis.get(this.keys.runStop(jobId)));
  }

  listen(signal: AbortSignal, listener: { request(request: RunStopRequest): void; resubscribed(): void }): void {
    if (signal.aborted) return;
    const channel = this.keys.runStops;
    // Connection errors surface as a reconnect; requests missed meanwhile are read again on `ready`.
    const subscriber = ownConnection(this.redis, { maxRetriesPerRequest: null }, () => signal.aborted, this.log);
    subscriber.on('message', (from: string, message: string) => {
      const request = from === channel ? parseRunStop(message) : undefined;
      if (request) listener.request(request);
    });
    subscriber.on('ready', () => {
      subscriber.subscribe(channel).then(() => listener.resubscribed(), () => undefined);
    });
    subscriber.connect().catch(() => undefined);
    signal.addEventListener('abort', () => subscriber.disconnect(), { once: true });
  }
}
