import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import type { TickJobData } from '../src/ledger/job-data.js';
import { TickLedger } from '../src/ledger/tick-ledger.js';
import { KeySpace } from '../src/redis/keys.js';
import { ChaosCluster, type Incarnation } from '../scripts/chaos/cluster.js';
import { EventTail } from '../scripts/chaos/events.js';
import type { ElectionTimings, LockKind } from '../scripts/chaos/plan.js';
import { addFates, describeFates, NO_FATES, tickFates, type TickFates } from './tick-fates.js';

const TICK_JOBS = fileURLToPath(new URL('./fixtures/failover/', import.meta.url));
/** The instances' logs of each failover run go here, for looking into a slow trial. */
const LOG_DIR = fileURLToPath(new URL('../test-results/bench/', import.meta.url));
const QUEUE = 'leasebeat';
/** The fixture's job: it ticks every second. */
const JOB = 'tick';
/** The fault lands this long before a tick, so the old leader misses it and the new one catches it up at once. */
const BEFORE_TICK_MS = 50;
/** A restarted instance must have watched the lease this long before it counts as a ready follower. */
const FOLLOWER_READY_MS = 3000;
const GIVE_UP_MS = 15_000;

/** SIGKILL (a crash), SIGTERM (a graceful release), or SIGSTOP (alive but silent: it stops renewing). */
export type FailoverKind = 'crash' | 'release' | 'stop';
const KINDS: FailoverKind[] = ['crash', 'release', 'stop'];
/** After a takeover, how long the old term is watched for a stale enqueue (a stopped leader is resumed first). */
const FENCE_WATCH_MS = 1500;
/** How long a release trial waits for the ticks due around the handover to have run (or be recorded skipped). */
const SETTLE_MS = 5_000;

export interface FailoverResult {
  lock: LockKind;
  kind: FailoverKind;
  /** Fault to the first enqueue (Redis write time) by the next leader, per trial; NaN when none came. */
  samplesMs: number[];
  /** Jobs written under an older term after the newer term's first enqueue, over all trials: must be 0. */
  staleEnqueues: number;
  /**
   * Release trials: what became of the ticks due around each handover (the one before the fault, the one
   * due just after it, the next), over all trials, from the ledger and BullMQ: every one must have run.
   */
  dueTicks?: TickFates;
}

/**
 * Failover trials on one lock: three real instances ticking every second; each trial kills the leader
 * (SIGKILL), stops it gracefully (SIGTERM: it releases the lease) or freezes it (SIGSTOP, resumed once
 * the next leader enqueued), in rotation, `trials` times each, and measures from the signal to the first
 * job the next leader writes. Every trial also checks the fence: no job of the old term after that. A
 * release hands over with no tick missed, so each release trial also checks that the ticks due around it
 * ran (issue 31: one was once taken back as `catchup-limit`).
 */
export async function measureFailover(lock: LockKind, trials: number, timings: ElectionTimings, log: (line: string) => void): Promise<FailoverResult[]> {
  const cluster = await ChaosCluster.start({ lock, instances: 3, jobsDir: TICK_JOBS, timings });
  const tail = new EventTail(() => cluster.newClient(), [`bull:${QUEUE}:events`]);
  const queue = new Queue(QUEUE, { connection: cluster.client });
  const results: Record<FailoverKind, number[]> = { crash: [], release: [], stop: [] };
  const stale: Record<FailoverKind, number> = { crash: 0, release: 0, stop: 0 };
  const ledger = new TickLedger(cluster.client, new KeySpace());
  let dueTicks = NO_FATES;
  try {
    tail.start();
    cluster.startAll();
    for (let trial = 0; trial < KINDS.length * trials; trial++) {
      const kind = KINDS[trial % KINDS.length]!;
      const leader = await steadyLeader(cluster, tail);
      const fence = Number(await cluster.client.hget('leasebeat:{leasebeat}:fence', 'transitions'));
      const tick = Math.ceil((Date.now() + 200) / 1000) * 1000;
      await sleep(tick - BEFORE_TICK_MS - Date.now());
      const faultAt = Date.now();
      const exited = kind === 'crash' ? cluster.kill(leader) : kind === 'release' ? cluster.terminate(leader, 15_000) : undefined;
      if (kind === 'stop') cluster.stop(leader);
      const gap = await firstEnqueueAfter(tail, queue, faultAt, fence);
      if (kind === 'stop') cluster.resume(leader);
      await sleep(FENCE_WATCH_MS);
      stale[kind] += await staleEnqueues(tail, queue, faultAt + gap, fence);
      const fates = kind === 'release' ? await settledFates(cluster, ledger, queue, [tick - 1000, tick, tick + 1000]) : undefined;
      if (fates) dueTicks = addFates(dueTicks, fates);
      if (exited) {
        await exited;
        // The next trial waits for the replacement to be up: its start-up CPU would slow the trial down.
        await cluster.restart(leader).instance.waitForLog((line) => line.msg === 'attempting to acquire the leader lease', 60_000);
      }
      results[kind].push(gap);
      const load = loadavg()[0]!.toFixed(2);
      const ran = fates ? `, ${describeFates(fates)}` : '';
      log(`  ${lock} ${kind} #${results[kind].length}: ${Number.isNaN(gap) ? `no enqueue within ${GIVE_UP_MS} ms` : `${gap} ms`}${ran} (fault at ${new Date(faultAt).toISOString()}, load ${load})`);
    }
    await mkdir(LOG_DIR, { recursive: true });
    await writeFile(`${LOG_DIR}failover-${lock}.ndjson`, cluster.logs().map(({ identity, line }) => JSON.stringify({ identity, ...line })).join('\n') + '\n');
  } finally {
    await tail.stop().catch(() => undefined);
    await queue.close();
    tail.close();
    await cluster.close();
  }
  return KINDS.map((kind) => ({ lock, kind, samplesMs: results[kind], staleEnqueues: stale[kind], ...(kind === 'release' && { dueTicks }) }));
}

/** The fates of `ticks` once each has run or been recorded skipped, or as they stand after {@link SETTLE_MS}. */
async function settledFates(cluster: ChaosCluster, ledger: TickLedger, queue: Queue, ticks: number[]): Promise<TickFates> {
  const deadline = Date.now() + SETTLE_MS;
  for (;;) {
    const fates = await tickFates(cluster.client, ledger, queue, JOB, ticks);
    if (fates.unrun === 0 || Date.now() > deadline) return fates;
    await sleep(100);
  }
}

/** Jobs written at or after `since` under a term no newer than `transitions`: enqueues the fence should have stopped. */
async function staleEnqueues(tail: EventTail, queue: Queue, since: number, transitions: number): Promise<number> {
  if (Number.isNaN(since)) return 0;
  let stale = 0;
  for (const [id, write] of tail.writes) {
    if (write.addedAt <= since) continue;
    const job = await queue.getJob(id);
    const term = (job?.data as TickJobData | undefined)?.token.leaderTransitions ?? Infinity;
    if (term <= transitions) stale++;
  }
  return stale;
}

/** Waits for a leader that is producing, with a follower up long enough to take over. */
async function steadyLeader(cluster: ChaosCluster, tail: EventTail): Promise<Incarnation> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const leader = await cluster.leader();
    const lastWrite = Math.max(0, ...[...tail.writes.values()].map((w) => w.addedAt));
    const followerReady = cluster.live().some((i) => i !== leader && !i.exitedAt && Date.now() - i.startedAt > FOLLOWER_READY_MS);
    if (leader && followerReady && Date.now() - lastWrite < 1200) return leader;
    if (Date.now() > deadline) throw new Error('no steady leader within 60 s');
    await sleep(50);
  }
}

/** The time from `faultAt` to the first job written under a term newer than `transitions`, or NaN. */
async function firstEnqueueAfter(tail: EventTail, queue: Queue, faultAt: number, transitions: number): Promise<number> {
  const deadline = faultAt + GIVE_UP_MS;
  const checked = new Set<string>();
  while (Date.now() < deadline) {
    const candidates = [...tail.writes].filter(([id, w]) => w.addedAt >= faultAt && !checked.has(id)).sort((a, b) => a[1].addedAt - b[1].addedAt);
    for (const [id, write] of candidates) {
      checked.add(id);
      const job = await queue.getJob(id);
      const term = (job?.data as TickJobData | undefined)?.token.leaderTransitions ?? -1;
      if (term > transitions) return write.addedAt - faultAt;
    }
    await sleep(10);
  }
  return NaN;
}
