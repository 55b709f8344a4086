import type { Redis } from 'ioredis';
import { directWrites } from '../../src/redis/durability.js';
import { RunRecords } from '../../src/workers/run-records.js';
import { WorkerPool } from '../../src/workers/worker-pool.js';

/** A worker pool on one server (no replicas to wait for), as a test makes it: its runs' records on `connection`. */
export function testWorkerPool(options: Omit<ConstructorParameters<typeof WorkerPool>[0], 'records'> & { connection: Redis; identity?: string }): WorkerPool {
  const { identity = 'test-worker', ...rest } = options;
  return new WorkerPool({ ...rest, records: new RunRecords(directWrites(options.connection), identity) });
}
