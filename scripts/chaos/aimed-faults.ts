import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import type { RedisProcess } from '../../test/support/redis-process.js';
import type { ChaosCluster } from './cluster.js';
import { AIM_KEY, RETURNED_CHANNEL, RETURNING_CHANNEL, type ReturnedNotice, type ReturningNotice } from './jobs/_record.js';
import type { ReplicatedRedis, Shard } from './topology.js';

/**
 * Issue 18's faults of a replicated Redis, each aimed at the instant where a failover loses the most:
 * a primary SIGKILLed right after a write that its replicas must not get. Replication is held first
 * (see {@link ReplicationHold}), so that "not replicated yet" does not depend on winning a race with
 * Redis' sub-millisecond replication on loopback; the aimed write is then seen on the primary itself
 * (MONITOR, see {@link CommandWatch}) and the primary killed at once.
 */

/** How an aimed kill went: what it waited for, and how close the SIGKILL came to it. */
export interface AimedKill {
  /** The instant aimed at, e.g. `handler of every-second@… returned on chaos-1-0`. */
  event: string;
  /** That instant and the SIGKILL, in ms (`Date.now()`, or the node's MONITOR clock: the same machine's). */
  eventAt: number;
  killedAt: number;
  /** killedAt − eventAt. */
  gapMs: number;
  /** How long the replicas had been cut off when the primary died; 0 when replication was not held. */
  heldMs: number;
  /** The primary killed. */
  port: number;
  jobId?: string;
}

/** What a fault of this file reports back; faults.ts adds index, kind and wasLeader. */
export interface PrimaryFaultOutcome {
  target?: string;
  startedAt: number;
  endedAt: number;
  detail: string;
  promotedAt?: number;
  aim?: AimedKill;
}

/** Bound on waiting for a replicated Redis to promote a replica after its primary died. */
export const PROMOTION_WAIT_MS = 30_000;
/** Bound on waiting for the aimed primary to have a replica online (a previous fault's node may still be syncing). */
const REPLICA_WAIT_MS = 10_000;
/** Bound on waiting for a handler to announce its return, or for a run to be staged (the per-second job's, every second). */
const HANDLER_WAIT_MS = 8_000;
/** Bound on waiting, after the go, for the run's finish to be written on the primary. */
const FINISH_WAIT_MS = 1_000;
/**
 * Staging and claiming happen on the whole second (the per-second job's ticks, claimed a horizon
 * ahead): replication is held this long before it, so that the hold stays short.
 */
const HOLD_LEAD_MS = 30;
/**
 * Bound on waiting under a hold for the aimed write: short, since every deciding write's WAIT fails
 * meanwhile, yet past one WAIT's timeout (500 ms): a WAIT blocked by the hold holds up the commands
 * sent after it on its connection, the aimed one among them.
 */
const HELD_WAIT_MS = 1_200;
/**
 * How long a staged add held from the replicas may wait for its `enqueued` record (which follows in a
 * few ms when the add is not confirmed on a replica first) before the primary is killed anyway.
 */
const RECORD_WAIT_MS = 150;
/** Holds tried, each at a later second, before a fault aimed at a whole second gives up. */
const AIM_ATTEMPTS = 3;
/** How long the fault's go key outlives a handler that stopped waiting for it. */
const GO_TTL_MS = 10_000;
/**
 * Runs are taken on the whole second (ticks are due then). A take's WAIT sent under the hold blocks the
 * workers' connection for the WAIT's timeout, and the aimed completion queued behind it: so the aimed
 * handler is one that returns this far from a whole second (the slow and buffered jobs' do).
 */
const QUIET_MS = 150;

const LEDGER_PREFIX = new KeySpace().ledger('');

/**
 * SIGKILLs a shard's primary, waits for a replica's promotion, and starts the dead node again
 * `restartAfterMs` later (as an orchestrator would; it comes back empty and rejoins as a replica).
 * `dead` runs once the node has exited (a hold's release); `probe` reads the promoted node at once,
 * before anyone writes there again (what the promotion lost).
 */
export async function killPrimary(
  redis: ReplicatedRedis,
  primary: RedisProcess,
  shard: Shard,
  restartAfterMs: number,
  hooks: { dead?: () => void; probe?: (promoted: Redis) => Promise<string> } = {},
): Promise<{ killedAt: number; promoted: RedisProcess; promotedAt: number; probed?: string }> {
  const killedAt = Date.now();
  // kill() sends the SIGKILL before its first await.
  await primary.kill();
  hooks.dead?.();
  const promoted = await redis.waitForPromotion(primary, PROMOTION_WAIT_MS, shard);
  const promotedAt = Date.now();
  let probed: string | undefined;
  if (hooks.probe) {
    const client = promoted.client({ retryStrategy: () => null });
    probed = await hooks.probe(client).catch((error: Error) => `the promoted primary could not be read (${error.message})`);
    client.disconnect();
  }
  await sleep(restartAfterMs);
  await primary.launch();
  return { killedAt, promoted, promotedAt, ...(probed === undefined ? {} : { probed }) };
}

/**
 * Holds a primary's replication: SIGSTOPs its replicas, then drops their links at the primary (CLIENT
 * KILL TYPE replica). SIGSTOP alone would not do: the kernel still takes what the primary sends into
 * the stopped replica's socket, and the replica applies it on SIGCONT. With the links dropped the
 * primary sends nothing more (bytes already in a socket were written before the hold, and may arrive),
 * and a stopped replica cannot reconnect. `release` SIGCONTs them: they reconnect, to the dead
 * primary's successor or, without a kill, to it at their next replication cron (within a second).
 */
export class ReplicationHold {
  private constructor(
    private readonly replicas: RedisProcess[],
    /** When the links were dropped. */
    readonly at: number,
    readonly dropped: number,
  ) {}

  static async begin(target: AimedPrimary): Promise<ReplicationHold> {
    for (const replica of target.replicas) replica.freeze();
    const dropped = Number(await target.control.call('CLIENT', 'KILL', 'TYPE', 'replica'));
    return new ReplicationHold(target.replicas, Date.now(), dropped);
  }

  /** Idempotent: a running process ignores SIGCONT. */
  release(): void {
    for (const replica of this.replicas) replica.resume();
  }

  describe(): string {
    return `replication held (replicas ${this.replicas.map((r) => r.port).join(', ')} SIGSTOPped, ${this.dropped} link(s) dropped at the primary)`;
  }
}

/** One command a node executed, as MONITOR shows it (commands run by scripts included), at the node's clock. */
interface Executed {
  seq: number;
  at: number;
  args: string[];
}

/**
 * MONITOR on one node: every command it executes, kept from the moment it is opened, so that a fault can
 * wait for a write that may already have gone by (two writes can arrive in one chunk). On a plain socket:
 * ioredis' monitor() takes the lines that share a chunk with MONITOR's +OK for stray replies, and throws.
 */
export class CommandWatch {
  private readonly seen: Executed[] = [];
  private readonly waiters = new Set<(command: Executed) => void>();
  private pending = '';

  private constructor(private readonly socket: Socket) {}

  static async open(node: Pick<RedisProcess, 'port'>): Promise<CommandWatch> {
    const socket = connect(node.port, '127.0.0.1');
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    const watch = new CommandWatch(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => socket.write('MONITOR\r\n'));
      socket.once('close', () => reject(new Error(`MONITOR on ${node.port}: connection closed`)));
      // Commands are seen from the +OK on.
      socket.on('data', (chunk: Buffer) => watch.read(chunk.toString('latin1'), resolve));
    });
    return watch;
  }

  /** A position in what was seen, for {@link next}. */
  mark(): number {
    return this.seen.length;
  }

  /** The first command from `from` on (default: from now) that `match` accepts, or undefined after `timeoutMs`. */
  next(match: (args: string[]) => boolean, timeoutMs: number, from = this.mark()): Promise<Executed | undefined> {
    const already = this.seen.slice(from).find((command) => match(command.args));
    if (already) return Promise.resolve(already);
    return new Promise((resolve) => {
      const done = (command: Executed | undefined): void => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve(command);
      };
      const waiter = (command: Executed): void => {
        if (match(command.args)) done(command);
      };
      const timer = setTimeout(() => done(undefined), timeoutMs);
      this.waiters.add(waiter);
    });
  }

  close(): void {
    this.socket.destroy();
  }

  /** Status lines: `+OK`, then `+<seconds.micros> [<db> <client>|lua] "arg" "arg" …` (ms floored, as Date.now() is). */
  private read(text: string, ready: () => void): void {
    const lines = (this.pending + text).split('\r\n');
    this.pending = lines.pop()!;
    for (const line of lines) {
      if (line === '+OK') ready();
      const space = line.indexOf(' ');
      if (!line.startsWith('+') || space < 0) continue;
      const command = { seq: this.seen.length, at: Math.floor(Number(line.slice(1, space)) * 1000), args: unquote(line.slice(line.indexOf(']', space) + 1)) };
      this.seen.push(command);
      for (const waiter of [...this.waiters]) waiter(command);
    }
  }
}

/** MONITOR's quoted arguments (sdscatrepr: \\, \", \n, \r, \t, \a, \b, \xHH). */
export function unquote(text: string): string[] {
  const args: string[] = [];
  const escapes: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
  for (let i = text.indexOf('"'); i >= 0 && i < text.length; i = text.indexOf('"', i + 1)) {
    let arg = '';
    for (i++; i < text.length && text[i] !== '"'; i++) {
      if (text[i] !== '\\') {
        arg += text[i];
      } else if (text[i + 1] === 'x') {
        arg += String.fromCharCode(parseInt(text.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        arg += escapes[text[i + 1]!] ?? text[i + 1];
        i++;
      }
    }
    args.push(arg);
  }
  return args;
}

/** A shard's primary with at least one replica online, its replicas, and a connection to it opened ahead. */
interface AimedPrimary {
  primary: RedisProcess;
  replicas: RedisProcess[];
  control: Redis;
}

/** Whether the node is a primary with a replica online. */
async function replicated(control: Redis): Promise<boolean> {
  const info = await control.info('replication').catch(() => '');
  return info.includes('role:master') && /^slave\d+:.*state=online/m.test(info);
}

/** The shard's primary, once a replica of it is online (else the failover the fault needs cannot happen). */
async function aimAt(redis: ReplicatedRedis, shard: Shard): Promise<AimedPrimary | string> {
  const deadline = Date.now() + REPLICA_WAIT_MS;
  for (;;) {
    const primary = await redis.primary(shard);
    const control = primary.client({ retryStrategy: () => null });
    // Every running replica is stopped, online or still syncing: one that connects during the hold would get the held writes.
    if (await replicated(control)) return { primary, replicas: await redis.replicasOf(primary), control };
    control.disconnect();
    if (Date.now() > deadline) return `no replica of the ${shard} primary ${primary.port} came online within ${REPLICA_WAIT_MS} ms`;
    await sleep(200);
  }
}

/**
 * Holds the target's replication just before a whole second and waits for a write that `match` accepts.
 * None within {@link HELD_WAIT_MS} (the leader lost its lease meanwhile, say): released, and tried again
 * at a later second once a replica is back online, {@link AIM_ATTEMPTS} times in all.
 */
async function holdAtSecond(target: AimedPrimary, watch: CommandWatch, match: (args: string[]) => boolean): Promise<{ hold?: ReplicationHold; command?: Executed; attempts: number }> {
  for (let attempts = 1; ; attempts++) {
    await untilJustBeforeSecond();
    const hold = await ReplicationHold.begin(target);
    const command = await watch.next(match, HELD_WAIT_MS);
    if (command) return { hold, command, attempts };
    hold.release();
    if (attempts === AIM_ATTEMPTS) return { attempts };
    // A released replica reconnects at its next replication cron, within a second.
    for (const deadline = Date.now() + REPLICA_WAIT_MS; !(await replicated(target.control)) && Date.now() < deadline;) await sleep(100);
  }
}

/** ` (hold 2 of 3)`, when the first hold found nothing. */
const attemptNote = (attempts: number): string => (attempts > 1 ? ` (hold ${attempts} of ${AIM_ATTEMPTS})` : '');

const skipped = (why: string): PrimaryFaultOutcome => {
  const now = Date.now();
  return { startedAt: now, endedAt: now, detail: `skipped: ${why}` };
};

/** Sleeps until `HOLD_LEAD_MS` before the next whole second at least that far away. */
async function untilJustBeforeSecond(): Promise<void> {
  const second = Math.ceil((Date.now() + HOLD_LEAD_MS + 20) / 1000) * 1000;
  await sleep(second - HOLD_LEAD_MS - Date.now());
}

/** The tick a chaos job id names (`<job>@<tick>`). */
const tickOf = (jobId: string): number => Number(jobId.slice(jobId.lastIndexOf('@') + 1));

const HASH_WRITES = new Set(['HSET', 'HMSET', 'HSETNX', 'HINCRBY', 'HDEL']);

/**
 * The first write of a run's end on BullMQ's server: to the job's hash (BullMQ's moveToFinished, or a
 * record of the finish written before it), or BullMQ's completed/failed event.
 */
function isFinish(jobKey: string, jobId: string): (args: string[]) => boolean {
  return (args) => {
    const command = args[0]?.toUpperCase() ?? '';
    const event = args.indexOf('event');
    return (HASH_WRITES.has(command) && args[1] === jobKey) ||
      (command === 'XADD' && event > 0 && ['completed', 'failed'].includes(args[event + 1]!) && args[event + 2] === 'jobId' && args[event + 3] === jobId);
  };
}

/** A run added to a delayed set well ahead of its tick: staged (not a run moved back to wait a moment). */
function isStagedAdd(bullPrefix: string): (args: string[]) => boolean {
  return (args) => args[0]?.toUpperCase() === 'ZADD' && args.length === 4 && args[1]!.startsWith(`${bullPrefix}:`) && args[1]!.endsWith(':delayed') && tickOf(args[3]!) > Date.now() + 500;
}

/** A ledger write of one job's tick whose new state starts with `state` (and names `jobId`, if given). */
function isLedgerWrite(state: string, jobId?: string): (args: string[]) => boolean {
  return (args) => args[0]?.toUpperCase() === 'HSET' && args[1]!.startsWith(LEDGER_PREFIX) && args[3]!.startsWith(state) && (jobId === undefined || args[3]!.includes(jobId));
}

/**
 * `bull-primary-kill-after-handler`: a handler announces its return (see jobs/_record.ts) and waits;
 * BullMQ's primary has its replication held; the handler is let go, and the primary SIGKILLed the
 * moment the run's finish is first written there. The promoted replica holds the run as active, with a
 * lock nobody renews: unless the worker records its finish again, stalled-job recovery runs it again.
 */
export async function killBullPrimaryAfterHandler(cluster: ChaosCluster, redis: ReplicatedRedis, restartAfterMs: number): Promise<PrimaryFaultOutcome> {
  const target = await aimAt(redis, 'bull');
  if (typeof target === 'string') return skipped(target);
  const watch = await CommandWatch.open(target.primary);
  const handshake = await Handshake.open(cluster);
  let hold: ReplicationHold | undefined;
  try {
    const notice = await handshake.first(HANDLER_WAIT_MS);
    if (!notice) return skipped(`no handler returned within ${HANDLER_WAIT_MS} ms`);
    hold = await ReplicationHold.begin(target);
    const queueKey = `${cluster.bullPrefix}:${notice.queue}`;
    const finish = watch.next(isFinish(`${queueKey}:${notice.jobId}`, notice.jobId), FINISH_WAIT_MS);
    const goAt = Date.now();
    await handshake.go(notice);
    const finished = await finish;
    const { killedAt, promoted, promotedAt, probed } = await killPrimary(redis, target.primary, 'bull', restartAfterMs, {
      dead: () => hold?.release(),
      probe: async (node) => {
        const [active, done] = await Promise.all([node.lpos(`${queueKey}:active`, notice.jobId), node.zscore(`${queueKey}:completed`, notice.jobId)]);
        return done !== null ? 'the promoted primary has the run completed' : active !== null ? 'the promoted primary has the run still active: its completion was lost' : 'the promoted primary has the run neither active nor completed';
      },
    });
    const returnedAt = (await handshake.returned(notice)) ?? goAt;
    const heldMs = killedAt - hold.at;
    // The instant aimed at is the finish's first write on the primary (the handler's return comes before it
    // by however long the worker's connection was busy: a take's WAIT under the hold can queue ahead of it).
    const aimedAt = finished
      ? { event: `finish of ${notice.jobId} written on BullMQ's primary (its handler returned on ${notice.identity} ${finished.at - returnedAt} ms before)`, at: finished.at }
      : { event: `handler of ${notice.jobId} returned on ${notice.identity}`, at: returnedAt };
    return {
      target: notice.identity, startedAt: hold.at, endedAt: Date.now(), promotedAt,
      aim: { event: aimedAt.event, eventAt: aimedAt.at, killedAt, gapMs: killedAt - aimedAt.at, heldMs, port: target.primary.port, jobId: notice.jobId },
      detail: `${hold.describe()} on BullMQ's primary ${target.primary.port}; handler of ${notice.jobId} on ${notice.identity} returned; ` +
        (finished ? `its finish written there ${finished.at - returnedAt} ms later (${finished.args[0]} ${finished.args[1]}); ` : `no finish of it written within ${FINISH_WAIT_MS} ms; `) +
        `SIGKILL ${killedAt - returnedAt} ms after the return (held ${heldMs} ms); ${promoted.port} promoted after ${promotedAt - killedAt} ms: ${probed}; ${target.primary.port} restarted`,
    };
  } finally {
    hold?.release();
    await handshake.close();
    watch.close();
    target.control.disconnect();
  }
}

/**
 * `bull-primary-kill-during-staged-delay`: BullMQ's primary is SIGKILLed while a staged run sits in its
 * delayed set (staged ~2 s ahead) and the ledger records it enqueued. On Cluster (another shard holds
 * the ledger) replication is held just before the whole second the run is staged on, so the promoted
 * replica never got the add; if the record does not follow within {@link RECORD_WAIT_MS} (the add is
 * confirmed on a replica before it is recorded), the primary is killed with the add unconfirmed.
 * Where the ledger shares the primary (Sentinel), nothing is held: the confirm's WAIT covers the add
 * there, and the kill checks just that.
 */
export async function killBullPrimaryDuringStagedDelay(cluster: ChaosCluster, redis: ReplicatedRedis, restartAfterMs: number): Promise<PrimaryFaultOutcome> {
  const target = await aimAt(redis, 'bull');
  if (typeof target === 'string') return skipped(target);
  const ledgerPrimary = await redis.primary('leasebeat');
  const shared = ledgerPrimary.port === target.primary.port;
  const bullWatch = await CommandWatch.open(target.primary);
  const ledgerWatch = shared ? bullWatch : await CommandWatch.open(ledgerPrimary);
  let hold: ReplicationHold | undefined;
  try {
    const from = ledgerWatch.mark();
    const staged = isStagedAdd(cluster.bullPrefix);
    const held = shared ? { attempts: 1 } : await holdAtSecond(target, bullWatch, staged);
    hold = held.hold;
    const add = shared ? await bullWatch.next(staged, HANDLER_WAIT_MS) : held.command;
    if (!add) return skipped(shared ? `no run staged within ${HANDLER_WAIT_MS} ms` : `no run staged within ${HELD_WAIT_MS} ms of a hold, ${held.attempts} times`);
    const startedAt = hold?.at ?? add.at;
    const jobId = add.args[3]!;
    const recorded = await ledgerWatch.next(isLedgerWrite('enqueued|', jobId), hold ? RECORD_WAIT_MS : HANDLER_WAIT_MS, from);
    if (!recorded && !hold) return skipped(`${jobId} staged, but not recorded enqueued within ${HANDLER_WAIT_MS} ms`);
    const delayedKey = add.args[1]!;
    // Without its record, the kill comes when the harness stops waiting for it.
    const aimedAt = recorded ? { event: `${jobId} staged and recorded enqueued`, at: recorded.at } : { event: `${jobId} staged, no enqueued record within ${RECORD_WAIT_MS} ms`, at: add.at + RECORD_WAIT_MS };
    const { killedAt, promoted, promotedAt, probed } = await killPrimary(redis, target.primary, 'bull', restartAfterMs, {
      dead: () => hold?.release(),
      probe: async (node) => {
        const [delayed, hash] = await Promise.all([node.zscore(delayedKey, jobId), node.exists(`${delayedKey.slice(0, -':delayed'.length)}:${jobId}`)]);
        return delayed !== null ? 'the promoted primary has the staged run' : hash ? 'the promoted primary has the run, no longer delayed' : 'the promoted primary has no such run: its add was lost';
      },
    });
    const heldMs = hold ? killedAt - hold.at : 0;
    return {
      startedAt, endedAt: Date.now(), promotedAt,
      aim: { event: aimedAt.event, eventAt: aimedAt.at, killedAt, gapMs: killedAt - aimedAt.at, heldMs, port: target.primary.port, jobId },
      detail: (hold ? `${hold.describe()} on BullMQ's primary ${target.primary.port} (the ledger's is ${ledgerPrimary.port}); ` : `BullMQ and the ledger share primary ${target.primary.port}: nothing held; `) +
        `${jobId} added to the delayed set${attemptNote(held.attempts)}, ` + (recorded ? `recorded enqueued ${recorded.at - add.at} ms later` : `not recorded enqueued within ${RECORD_WAIT_MS} ms`) +
        `; SIGKILL ${killedAt - add.at} ms after the add, ${tickOf(jobId) - killedAt} ms before the run was due${hold ? ` (held ${heldMs} ms)` : ''}; ` +
        `${promoted.port} promoted after ${promotedAt - killedAt} ms: ${probed}; ${target.primary.port} restarted`,
    };
  } finally {
    hold?.release();
    bullWatch.close();
    if (!shared) ledgerWatch.close();
    target.control.disconnect();
  }
}

/**
 * `ledger-primary-kill-between-claim-and-wait`: the ledger's primary has its replication held just before
 * the whole second claims are made on; the first claim written there is followed by a SIGKILL at once,
 * before the claim's WAIT can be acknowledged; the promoted replica never got the claim.
 */
export async function killLedgerPrimaryBetweenClaimAndWait(redis: ReplicatedRedis, restartAfterMs: number): Promise<PrimaryFaultOutcome> {
  const target = await aimAt(redis, 'leasebeat');
  if (typeof target === 'string') return skipped(target);
  const watch = await CommandWatch.open(target.primary);
  let hold: ReplicationHold | undefined;
  try {
    const held = await holdAtSecond(target, watch, isLedgerWrite('claimed|'));
    hold = held.hold;
    const claim = held.command;
    if (!hold || !claim) return skipped(`no claim within ${HELD_WAIT_MS} ms of a hold, ${held.attempts} times`);
    const [, ledgerKey, tick, state] = claim.args as [string, string, string, string];
    const claimed = `${ledgerKey.slice(LEDGER_PREFIX.length)}@${tick}`;
    const { killedAt, promoted, promotedAt, probed } = await killPrimary(redis, target.primary, 'leasebeat', restartAfterMs, {
      dead: () => hold?.release(),
      probe: async (node) => {
        const now = await node.hget(ledgerKey, tick);
        return now === null ? 'the promoted primary has no record of the tick: the claim was lost' : now === state ? 'the promoted primary has the claim' : `the promoted primary records the tick ${now}`;
      },
    });
    const heldMs = killedAt - hold.at;
    return {
      startedAt: hold.at, endedAt: Date.now(), promotedAt,
      aim: { event: `claim of ${claimed} written`, eventAt: claim.at, killedAt, gapMs: killedAt - claim.at, heldMs, port: target.primary.port, jobId: claimed },
      detail: `${hold.describe()} on the ledger's primary ${target.primary.port}; claim of ${claimed} written ${claim.at - hold.at} ms into the hold${attemptNote(held.attempts)}; ` +
        `SIGKILL ${killedAt - claim.at} ms after it (held ${heldMs} ms); ${promoted.port} promoted after ${promotedAt - killedAt} ms: ${probed}; ${target.primary.port} restarted`,
    };
  } finally {
    hold?.release();
    watch.close();
    target.control.disconnect();
  }
}

/**
 * The fault's side of the handshake of jobs/_record.ts, on the records' server: sets the aim, takes the
 * first handler that announces its return away from a whole second, lets every other one go at once,
 * and hears when the chosen one returned.
 */
class Handshake {
  private chosen: ReturningNotice | undefined;
  private onFirst: ((notice: ReturningNotice) => void) | undefined;
  private readonly returns = new Map<string, number>();
  private onReturned: (() => void) | undefined;

  private constructor(
    private readonly subscriber: Redis,
    private readonly records: Redis,
  ) {
    subscriber.on('message', (channel: string, text: string) => {
      if (channel === RETURNED_CHANNEL) {
        const returned = JSON.parse(text) as ReturnedNotice;
        this.returns.set(returned.go, returned.returnedAt);
        this.onReturned?.();
        return;
      }
      const notice = JSON.parse(text) as ReturningNotice;
      const phase = Date.now() % 1000;
      if (this.chosen || !this.onFirst || phase < QUIET_MS || phase > 1000 - QUIET_MS) {
        void this.go(notice);
        return;
      }
      this.chosen = notice;
      this.onFirst(notice);
    });
  }

  static async open(cluster: ChaosCluster): Promise<Handshake> {
    const subscriber = cluster.records.client();
    subscriber.on('error', () => undefined);
    await subscriber.subscribe(RETURNING_CHANNEL, RETURNED_CHANNEL);
    return new Handshake(subscriber, cluster.recordsClient);
  }

  /** Aims the handlers, and resolves with the one chosen to return under the fault (it waits for {@link go}). */
  async first(timeoutMs: number): Promise<ReturningNotice | undefined> {
    const chosen = new Promise<ReturningNotice | undefined>((resolve) => {
      this.onFirst = resolve;
      setTimeout(() => {
        // Late notices are let go at once.
        this.onFirst = undefined;
        resolve(undefined);
      }, timeoutMs).unref();
    });
    await this.records.set(AIM_KEY, '1', 'PX', timeoutMs);
    const notice = await chosen;
    await this.records.del(AIM_KEY);
    return notice;
  }

  async go(notice: ReturningNotice): Promise<void> {
    await this.records.multi().rpush(notice.go, 'go').pexpire(notice.go, GO_TTL_MS).exec();
  }

  /** When the handler said it returned (its own clock), waiting a little for the message. */
  async returned(notice: ReturningNotice): Promise<number | undefined> {
    const deadline = Date.now() + 500;
    while (!this.returns.has(notice.go) && Date.now() < deadline) {
      await Promise.race([new Promise<void>((resolve) => (this.onReturned = resolve)), sleep(deadline - Date.now())]);
    }
    return this.returns.get(notice.go);
  }

  async close(): Promise<void> {
    await this.records.del(AIM_KEY);
    this.subscriber.disconnect();
  }
}
