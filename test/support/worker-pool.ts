import type { Redis } from 'ioredis';
import type { TickLedger } from '../../src/ledger/tick-ledger.js';
import { directWrites } from '../../src/redis/durability.js';
import { RunRecords } from '../../src/workers/run-records.js';
import { WorkerPool } from '../../src/workers/worker-pool.js';

/** A worker pool on one server (no replicas to wait for), as a test makes it: its runs' records on `connection`. */
export function testWorkerPool(options: Omit<ConstructorParameters<typeof WorkerPool>[0], 'records'> & { connection: Redis; identity?: string }): WorkerPool {
  const { identity = 'test-worker', ...rest } = options;
  return new WorkerPool({ ...rest, records: new RunRecords(directWrites(options.connection), identity) });
}

/**
 * A worker pool's `mayStartStaged` that asks `ledger`, as an instance does (stagedRunMayStart.lua): a term
 * counts as alive for 1.5 s after its last stamp, the RenewDeadline of the tests' elections.
 */
export function stagedRunsHeldBy(ledger: TickLedger): NonNullable<ConstructorParameters<typeof WorkerPool>[0]['mayStartStaged']> {
  return (name, run) => ledger.stagedRunMayStart(run.stagedBy ?? run.token, name, run.tick, run.dueAt!, 1_500);
}
