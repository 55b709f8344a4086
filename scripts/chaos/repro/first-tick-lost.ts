/**
 * Repro of a lost first tick, found by the chaos suite (fixed since): a job that no term has ticked yet has no
 * `lastScheduledTick`, so when its leader dies between the job's first nominal tick and the claim of that
 * tick, the next leader's catch-up plan treats the job as never scheduled and the tick gets neither a job
 * nor a recorded skip.
 *
 *   node --import tsx scripts/chaos/repro/first-tick-lost.ts     (exit 1 if the bug is back; fixed in 998d9e6)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import type { Term } from '../../../src/election/record.js';
import { KeySpace } from '../../../src/redis/keys.js';
import { Producer } from '../../../src/producing/producer.js';
import { QueueSet } from '../../../src/redis/queue-set.js';
import { TickLedger } from '../../../src/ledger/tick-ledger.js';
import { nextTick } from '../../../src/scheduling/plan.js';
import { validateJobDefinition } from '../../../src/scheduling/schema.js';
import { startRedis } from '../../../test/support/redis-server.js';

const server = await startRedis();
const redis = server.client();
const ledger = new TickLedger(redis, new KeySpace());
const queues = new QueueSet({ connection: redis });
const validated = validateJobDefinition({ name: 'every-3s', every: '3s', handler: () => undefined }, '/jobs/every-3s.ts');
if (!validated.ok) throw new Error(validated.errors.join('\n'));
const job = validated.job;
const producer = new Producer({ redis, ledger, queues, jobs: () => new Map([[job.name, job]]), stillLeading: () => true, logger: pino({ level: 'silent' }) });
const term = (transitions: number): Term => ({ holderIdentity: `leader-${transitions}`, generation: 'gen', leaderTransitions: transitions, acquireTime: Date.now() });

try {
  // Term 0 takes the job over well before its first tick...
  let first = nextTick(job, Date.now())!;
  if (first - Date.now() < 1000) first = nextTick(job, first)!;
  const crashed = new AbortController();
  const run = producer.run(term(0), crashed.signal);
  // ...and stops 100 ms before that tick, as a crash or a SIGSTOP would stop it: nothing claimed.
  await sleep(first - 100 - Date.now());
  crashed.abort();
  await run;
  // Term 1 takes over 500 ms after the tick, as a follower would after the lease expired.
  await sleep(first + 500 - Date.now());
  const next = new AbortController();
  const running = producer.run(term(1), next.signal);
  await sleep(nextTick(job, first)! + 500 - Date.now());
  next.abort();
  await running;

  const state = await ledger.tickState(job.name, first);
  const skipped = (await ledger.skippedRanges(job.name)).some((r) => r.from <= first && first <= r.to);
  const later = await ledger.tickState(job.name, nextTick(job, first)!);
  console.log(`first tick ${new Date(first).toISOString()}: ledger ${state ?? '(nothing)'}, in a skipped range: ${skipped}`);
  console.log(`the tick after it: ledger ${later ?? '(nothing)'}`);
  const lost = state === undefined && !skipped;
  console.log(lost ? 'BUG: the first tick has neither a job nor a recorded skip' : 'ok: the first tick was enqueued or recorded as skipped');
  process.exitCode = lost ? 1 : 0;
} finally {
  await queues.close();
  redis.disconnect();
  await server.close();
}
