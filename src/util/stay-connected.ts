import type { RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { isCluster, type RedisClient } from './redis-client.js';
import { backoffMs } from './backoff.js';

/** How long after an unexpected end a connection is opened again, doubling up to the maximum. */
const REVIVE_MS = 250;
const MAX_REVIVE_MS = 5_000;

/**
 * Keeps a long-lived client connected for as long as `closing()` is false. ioredis ends a connection for
 * good ("Connection is closed." from then on) when its connect attempt is cut short, which its Sentinel
 * failover detector does when a `+switch-master` arrives while a reconnect is under way (ioredis #1683,
 * seen in the Sentinel chaos runs: an instance cut off from Redis while its process ran on, its runs
 * re-run elsewhere once their locks expired). An end that we did not ask for is answered by connecting
 * again, with backoff, until it holds.
 */
export function stayConnected(client: RedisClient, closing: () => boolean, logger: Logger): void {
  let attempt = 0;
  const revive = (): void => {
    if (closing() || client.status !== 'end') return;
    const delay = backoffMs(attempt++, REVIVE_MS, MAX_REVIVE_MS);
    setTimeout(() => {
      if (closing() || client.status !== 'end') return;
      logger.warn({ attempt }, 'the Redis connection ended without being closed; connecting again');
      client.connect().then(
        () => (attempt = 0),
        () => revive(),
      );
    }, delay).unref();
  };
  client.on('end', revive);
}

/**
 * A long-lived connection of its own to the topology of `client` (a blocking read, a subscriber), with
 * `overrides` for its node connections, kept connected by {@link stayConnected} until `closing()`.
 * Every such connection needs the revival: one ended for good stops the feed it carries without a word
 * (a leader that no longer hears schedule edits, a worker deaf to stop requests). Not connected yet: the
 * first command connects it. A Cluster duplicates with its startup nodes (its first argument), not options.
 */
export function ownConnection(client: RedisClient, overrides: RedisOptions, closing: () => boolean, logger: Logger): RedisClient {
  const own = isCluster(client)
    ? client.duplicate([], { lazyConnect: true, redisOptions: { ...client.options.redisOptions, ...overrides } })
    : client.duplicate({ ...overrides, lazyConnect: true });
  // Errors reach the command that failed (or surface as a reconnect); unhandled, the event would be printed.
  own.on('error', () => undefined);
  stayConnected(own, closing, logger);
  return own;
}
