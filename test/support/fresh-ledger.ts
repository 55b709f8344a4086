import { beforeEach } from 'node:test';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { KeySpace } from '../../src/redis/keys.js';
import { QueueSet } from '../../src/redis/queue-set.js';
import type { RedisFixture } from './redis-server.js';

/** A ledger and a BullMQ queue set on the suite's Redis, made afresh on an emptied server for each test. */
export interface FreshLedger {
  readonly ledger: TickLedger;
  readonly queues: QueueSet;
}

/**
 * Before each test: closes the last test's queues, flushes the server, then makes a new ledger (default
 * key space) and queue set on `redis`'s client. The last queues close before the server goes.
 */
export function useFreshLedger(redis: RedisFixture): FreshLedger {
  let ledger: TickLedger | undefined;
  let queues: QueueSet | undefined;
  redis.beforeClose(() => queues?.close());
  beforeEach(async () => {
    await queues?.close();
    await redis.client.flushall();
    ledger = new TickLedger(redis.client, new KeySpace());
    queues = new QueueSet({ connection: redis.client });
  });
  return {
    get ledger(): TickLedger {
      return ledger!;
    },
    get queues(): QueueSet {
      return queues!;
    },
  };
}
