/**
 * The chaos suite's command line:
 *
 *   npm run chaos -- --minutes 10 --instances 3 --lock redis [--redis single|sentinel|cluster] [--seed 42] [--faults k1,k2] [--lead k1,k2] [--schedules N]
 *
 * `--redis sentinel` runs leasebeat on a Sentinel group (1 primary, 2 replicas, 3 sentinels), `--redis
 * cluster` on a Redis Cluster (3 primaries, 3 replicas), both started here, with their own faults (the
 * primary killed or frozen past the failure detector, a replica restarted; and issue 18's kills aimed at
 * the worst instant: BullMQ's primary right after a handler returned or while a staged run waits, the
 * ledger's right after a claim) besides the processes'.
 * `--faults` draws only those kinds; `--lead` injects those kinds first, then draws from all.
 * `--schedules N`: how many runtime schedules a client upserts, edits and removes during the faults
 * (default 6; 0 for none); the audit covers them as it covers the file jobs.
 * Prints the seeded fault schedule, each fault as it is injected, and the report; writes report.json,
 * report.md and the processes' logs under test-results/chaos/. Exits 1 when an invariant was violated.
 */
import { parseArgs } from 'node:util';
import { toMarkdown } from './report.js';
import { faultKinds } from './plan.js';
import { DEFAULT_SCHEDULES } from './schedules-client.js';
import { runChaos } from './suite.js';
import { REDIS_KINDS, type RedisKind } from './topology.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '1' },
    instances: { type: 'string', default: '3' },
    lock: { type: 'string', default: 'redis' },
    redis: { type: 'string', default: 'single' },
    seed: { type: 'string' },
    out: { type: 'string' },
    faults: { type: 'string' },
    lead: { type: 'string' },
    schedules: { type: 'string', default: String(DEFAULT_SCHEDULES) },
  },
});

const minutes = Number(values.minutes);
const instances = Number(values.instances);
const seed = values.seed === undefined ? Date.now() % 1_000_000 : Number(values.seed);
const redis = values.redis as RedisKind;
const schedules = Number(values.schedules);
if (!Number.isInteger(schedules) || schedules < 0 || !(minutes > 0) || !Number.isInteger(instances) || instances < 2 || !Number.isInteger(seed) || !['redis', 'kubernetes'].includes(values.lock) || !REDIS_KINDS.includes(redis)) {
  console.error('usage: npm run chaos -- --minutes N --instances K (K >= 2) --lock redis|kubernetes [--redis single|sentinel|cluster] [--seed S] [--out DIR] [--faults k1,k2] [--lead k1,k2] [--schedules N]');
  for (const kind of REDIS_KINDS) console.error(`fault kinds on ${kind} Redis: redis lock: ${faultKinds('redis', kind).join(', ')}; kubernetes lock: ${faultKinds('kubernetes', kind).join(', ')}`);
  process.exit(2);
}

const { report, outDir } = await runChaos({
  lock: values.lock as 'redis' | 'kubernetes',
  redis,
  instances,
  durationMs: Math.round(minutes * 60_000),
  seed,
  outDir: values.out,
  faults: {
    ...(values.faults ? { only: values.faults.split(',') } : {}),
    ...(values.lead ? { lead: values.lead.split(',') } : {}),
  },
  schedules,
  log: (line) => console.log(line),
});
console.log('');
console.log(toMarkdown(report));
console.log(`reports: ${outDir}/report.md, report.json, instances.ndjson`);
process.exit(report.ok ? 0 : 1);
