/**
 * Repro of a lost buffered tick (fixed since): with `overlap: 'bufferOne'`, a tick that found the previous
 * run unfinished was held in the leader's memory only (not claimed in the ledger), while the tick after it
 * was claimed as skipped and moved `lastScheduledTick` past it. When the term ended before the previous
 * run finished (crash, SIGTERM, lost lease), the held tick got neither a job nor a recorded skip.
 *
 *   node --import tsx scripts/chaos/repro/buffered-tick-lost.ts     (exit 1 if the bug is back; fixed in 998d9e6)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import type { Term } from '../../../src/election/record.js';
import { KeySpace } from '../../../src/redis/keys.js';
import { Producer } from '../../../src/producing/producer.js';
import { QueueSet } from '../../../src/redis/queue-set.js';
import { TickLedger } from '../../../src/ledger/tick-ledger.js';
import { nextTicks } from '../../../src/scheduling/plan.js';
import { validateJobDefinition } from '../../../src/scheduling/schema.js';
import { startRedis } from '../../../test/support/redis-server.js';

const server = await startRedis();
const redis = server.client();
const ledger = new TickLedger(redis, new KeySpace());
const queues = new QueueSet({ connection: redis });
const validated = validateJobDefinition({ name: 'buffered', every: '1s', overlap: 'bufferOne', handler: () => undefined }, '/jobs/buffered.ts');
if (!validated.ok) throw new Error(validated.errors.join('\n'));
const job = validated.job;
const producer = new Producer({ redis, ledger, queues, jobs: () => new Map([[job.name, job]]), stillLeading: () => true, logger: pino({ level: 'silent' }) });
const term = (transitions: number): Term => ({ holderIdentity: `leader-${transitions}`, generation: 'gen', leaderTransitions: transitions, acquireTime: Date.now() });

try {
  // No worker runs, so the first run stays waiting: the second tick is buffered, the third skipped.
  const ticks = nextTicks(job, Date.now() + 200, 3);
  const first = new AbortController();
  const run = producer.run(term(0), first.signal);
  await sleep(ticks[2]! + 300 - Date.now());
  first.abort();
  await run;
  // The next term finds lastScheduledTick at the third tick: the second is behind it.
  const second = new AbortController();
  const next = producer.run(term(1), second.signal);
  await sleep(1500);
  second.abort();
  await next;

  for (const tick of ticks) console.log(`${new Date(tick).toISOString()}: ${(await ledger.tickState(job.name, tick)) ?? '(nothing)'}`);
  const held = ticks[1]!;
  const lost = (await ledger.tickState(job.name, held)) === undefined && !(await ledger.skippedRanges(job.name)).some((r) => r.from <= held && held <= r.to);
  console.log(lost ? 'BUG: the buffered tick has neither a job nor a recorded skip' : 'ok: the buffered tick was recorded');
  process.exitCode = lost ? 1 : 0;
} finally {
  await queues.close();
  redis.disconnect();
  await server.close();
}
