import type { Redis } from 'ioredis';
import type { StagedRun, TickLedger } from '../../src/ledger/tick-ledger.js';
import type { TickJobData } from '../../src/ledger/job-data.js';
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
  const run = (ids: { job: string; jobId: string }, data: TickJobData): StagedRun => ({ ...ids, tick: data.tick, dueAt: data.dueAt! });
  return {
    mayStartStaged: (ids, data) => ledger.stagedRunMayStart(data.stagedBy ?? data.token, run(ids, data), 1_500),
    stagedCheck: (ids, data) => ledger.stagedRunCheck(data.stagedBy ?? data.token, run(ids, data), 1_500),
  };
}
