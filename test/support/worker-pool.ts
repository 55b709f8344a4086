import type { Redis } from 'ioredis';
import type { TickLedger } from '../../src/ledger/tick-ledger.js';
import { directWrites } from '../../src/redis/durability.js';
import { RunRecords } from '../../src/workers/run-records.js';
import { WorkerPool } from '../../src/workers/worker-pool.js';

/** A worker pool on one server (no replicas to wait for), as a test makes it: its runs' records on `connection`. */
type PoolOptions = ConstructorParameters<typeof WorkerPool>[0];

export function testWorkerPool(options: Omit<ConstructorParameters<typeof WorkerPool>[0], 'records'> & { connection: Redis; identity?: string }): WorkerPool {
  const { identity = 'test-worker', ...rest } = options;
  return new WorkerPool({ ...rest, records: new RunRecords(directWrites(options.connection), identity) });
}

/**
 * A worker pool's staged-run checks that ask `ledger`, as an instance on one server does: the take makes
 * the check in its own script (`stagedCheck`, startStagedRuns.lua), `mayStartStaged` being the check alone
 * (a Cluster's way). A term counts as alive for 1.5 s after its last stamp, the RenewDeadline of the tests'
 * elections.
 */
export function stagedRunsHeldBy(ledger: TickLedger): Pick<PoolOptions, 'mayStartStaged' | 'stagedCheck'> {
  return {
    mayStartStaged: (run, data) => ledger.stagedRunMayStart(run, data, 1_500),
    stagedCheck: (run, data) => ledger.stagedRunCheck(run, data, 1_500),
  };
}
