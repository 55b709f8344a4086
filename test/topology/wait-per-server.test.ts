import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { DurabilityError, ReplicaWait } from '../../src/redis/durability.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger, type ClaimOutcome } from '../../src/ledger/tick-ledger.js';
import { startReplicatedPrimary, type ReplicatedPrimary } from '../support/replicated-redis.js';
import { TcpProxy, type SwitchMode } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

/**
 * "WAIT that knows which server it asked": a WAIT runs on whatever server its connection reaches when it
 * is sent. Two primaries, A and B, each with one replica (so `WAIT 1` can succeed on either); the client
 * reaches A through a proxy that the test switches to B right after a write's reply was handed to the
 * client (from the proxy's `onDelivered`: the reply is in the client's socket, unread, so the client
 * cannot have sent its WAIT yet). A's replication is held meanwhile, so the write stands on A alone: it
 * must not count as replicated, whatever B's WAIT answers (a fresh connection's WAIT counts every replica
 * at once). Every verdict is checked against the keys on A, B and their replicas.
 *
 * On a control connection (maxRetriesPerRequest 0) a reset between a write's reply and its WAIT fails that
 * WAIT itself (it goes out on the dead socket before ioredis sees the close, and is failed with what was in
 * flight): not confirmed, before and after the fix. There the reset matters for a WAIT queued behind one in
 * flight, which goes out once ioredis reconnected: the last cases. The single-write reset cases run on the
 * worker connection, which resends what was in flight.
 */

const token = { generation: 'g1', leaderTransitions: 7 };

/** The two ways leasebeat connects: a control connection fails a command at once, a worker's retries it for ever. */
const STYLES = {
  control: { maxRetriesPerRequest: 0 },
  worker: { maxRetriesPerRequest: null },
} as const;
type Style = keyof typeof STYLES;

/** The ledger the test writes through, every deciding write confirmed by `wait`. */
function ledgerOn(client: Redis, keys: KeySpace, wait: ReplicaWait): TickLedger {
  return new TickLedger(client, keys, wait);
}

/** A write leasebeat does not script, confirmed by `wait` (as FencedEnqueue makes its BullMQ adds). */
function confirmedSet(wait: ReplicaWait, client: Redis, key: string): Promise<unknown> {
  return wait.write(key, () => client.set(key, 'written'), () => `SET ${key}`);
}

/** How a claim ended: confirmed, refused as not durable (with the reason), or failed otherwise. */
async function verdict(claim: Promise<ClaimOutcome>): Promise<string> {
  try {
    return `confirmed: ${JSON.stringify(await claim)}`;
  } catch (error) {
    return error instanceof DurabilityError ? `unconfirmed: ${error.message}` : `failed: ${String(error)}`;
  }
}

/** What a client wrote, one command name per entry, in order (ioredis writes them in lower case). */
function commandsIn(chunk: Buffer): string[] {
  return [...chunk.toString('latin1').matchAll(/\*\d+\r\n\$\d+\r\n([a-z]+)\r\n/gi)].map((match) => match[1]!.toLowerCase());
}

describe('WAIT that knows which server it asked (primaries A and B, each with a replica; a proxy in front of A)', () => {
  let a: ReplicatedPrimary;
  let b: ReplicatedPrimary;
  const opened: Array<{ close(): Promise<void> | void }> = [];
  let cases = 0;

  before(async () => {
    [a, b] = await Promise.all([startReplicatedPrimary(), startReplicatedPrimary()]);
  });
  afterEach(async () => {
    for (const resource of opened.splice(0).reverse()) await resource.close();
    // Whatever a case held on A's replication arrives now, so the next case starts with A's replica in sync.
    a.link.heal('deliver');
    await a.caughtUp();
  });
  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  /**
   * A connection of `style` to A through a proxy. `onReply(matches, act)` arms a trap for the first reply
   * chunk that `matches`, which runs `act` from `onDelivered`; `switchToB(mode)` is the usual act.
   * `commands` lists what the client sent, in order.
   */
  async function connectThroughProxy(style: Style) {
    let trap: { matches: (reply: string) => boolean; act: () => void; sprung: () => void } | undefined;
    const commands: string[] = [];
    const proxy = await TcpProxy.start(
      { port: a.primary.port },
      {
        onClientData: (chunk) => commands.push(...commandsIn(chunk)),
        onDelivered: (chunk) => {
          if (!trap || !trap.matches(chunk.toString('latin1'))) return;
          const { act, sprung } = trap;
          trap = undefined;
          act();
          sprung();
        },
      },
    );
    opened.push(proxy);
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, ...STYLES[style] });
    client.on('error', () => undefined);
    opened.push({ close: () => client.disconnect() });
    await client.ping();
    return {
      client,
      commands,
      onReply: (matches: (reply: string) => boolean, act: () => void) => new Promise<void>((sprung) => (trap = { matches, act, sprung })),
      switchToB: (mode: SwitchMode) => () => proxy.switchTo({ port: b.primary.port }, mode),
    };
  }

  /** A fresh key space per case, its fence raised on A and confirmed by A's replica (no switch). */
  async function ledgerCase(client: Redis, timeoutMs: number): Promise<{ ledger: TickLedger; keys: KeySpace }> {
    const keys = new KeySpace('leasebeat', `wait-per-server-${++cases}`);
    const wait = new ReplicaWait(client, { minReplicas: 1, timeoutMs });
    const ledger = ledgerOn(client, keys, wait);
    assert.deepEqual(await ledger.raiseFence(token, 'me', Date.now()), { ok: true });
    // Without a switch a claim is confirmed, and A's replica holds it.
    assert.deepEqual(await ledger.claim(token, 'job', 1_000, 'job@1000'), { kind: 'claimed', retry: false });
    assert.match((await a.onReplica.hget(keys.ledger('job'), '1000')) ?? '', /^claimed\|/, "A's replica holds the confirmed claim");
    return { ledger, keys };
  }

  /** Ground truth: the tick is claimed on A and on none of A's replica, B, B's replica. */
  async function onlyOnA(keys: KeySpace, tick: number): Promise<void> {
    assert.match((await a.onPrimary.hget(keys.ledger('job'), String(tick))) ?? '', /^claimed\|/, `A holds the claim of ${tick}`);
    assert.equal(await a.onReplica.hget(keys.ledger('job'), String(tick)), null, `A's replica lacks the claim of ${tick}`);
    assert.equal(await b.onPrimary.hget(keys.ledger('job'), String(tick)), null, `B lacks the claim of ${tick}`);
    assert.equal(await b.onReplica.hget(keys.ledger('job'), String(tick)), null, `B's replica lacks the claim of ${tick}`);
  }

  /** The refusal a switch calls for: another server's run id (mid-stream), another socket (reconnect). */
  const refusedFor = (mode: SwitchMode) => (error: unknown): boolean => {
    assert.ok(error instanceof DurabilityError, `a DurabilityError, not ${String(error)}`);
    assert.match(error.reason ?? '', mode === 'mid-stream' ? /the WAIT ran on another server/ : /the connection was re-established/);
    return true;
  };

  /** WAITs a server ran so far (INFO commandstats). */
  const waitsOn = async (server: Redis): Promise<number> => Number(/cmdstat_wait:calls=(\d+)/.exec(await server.info('commandstats'))?.[1] ?? 0);
  const blockedOn = async (server: Redis): Promise<number> => Number(/blocked_clients:(\d+)/.exec(await server.info('clients'))?.[1] ?? 0);

  const singleWriteCases: Array<[Style, SwitchMode]> = [
    ['control', 'mid-stream'],
    ['worker', 'mid-stream'],
    ['worker', 'reconnect'],
  ];
  for (const [style, mode] of singleWriteCases) {
    it(`${style} connection: a claim A acknowledged, then a ${mode} switch to B before its WAIT: not confirmed`, async () => {
      const { client, onReply, switchToB } = await connectThroughProxy(style);
      // The WAIT after the switch answers at once (B's replica counts); the bound is for the confirmed claims before.
      const { ledger, keys } = await ledgerCase(client, 2_000);
      a.link.partition('blackhole');
      // The claim's reply is an array (the first after arming: the connection is otherwise idle).
      const switched = onReply((reply) => reply.startsWith('*'), switchToB(mode));
      const waitsOnB = await waitsOn(b.onPrimary);
      await assert.rejects(ledger.claim(token, 'job', 2_000, 'job@2000', { previousTick: 1_000 }), refusedFor(mode), 'a claim that stands on A alone is not confirmed');
      await switched;
      assert.equal(await waitsOn(b.onPrimary), waitsOnB + 1, 'its WAIT ran on B');
      await onlyOnA(keys, 2_000);
    });

    it(`${style} connection: a write leasebeat does not script (write()), then a ${mode} switch to B before its WAIT: not confirmed`, async () => {
      const { client, onReply, switchToB } = await connectThroughProxy(style);
      const wait = new ReplicaWait(client, { minReplicas: 1, timeoutMs: 2_000 });
      const key = `wait-per-server:{w${++cases}}:record`;
      // Without a switch the write is confirmed, and A's replica holds it.
      await confirmedSet(wait, client, `${key}:first`);
      assert.equal(await a.onReplica.get(`${key}:first`), 'written');
      a.link.partition('blackhole');
      const switched = onReply((reply) => reply === '+OK\r\n', switchToB(mode));
      const waitsOnB = await waitsOn(b.onPrimary);
      await assert.rejects(confirmedSet(wait, client, key), refusedFor(mode), 'a write that stands on A alone is not confirmed');
      await switched;
      assert.equal(await waitsOn(b.onPrimary), waitsOnB + 1, 'its WAIT ran on B');
      assert.equal(await a.onPrimary.get(key), 'written', 'A holds the write');
      assert.equal(await a.onReplica.get(key), null, "A's replica lacks it");
      assert.equal(await b.onPrimary.get(key), null, 'B lacks it');
      assert.equal(await b.onReplica.get(key), null, "B's replica lacks it");
    });
  }

  for (const style of Object.keys(STYLES) as Style[]) {
    it(`${style} connection: the first WAIT answered (0: A's replica held) and a second claim ran on A behind it; a mid-stream switch as that claim's reply is handed over sends the second batch's WAIT to B: not confirmed`, async () => {
      const { client, onReply, switchToB } = await connectThroughProxy(style);
      // Long enough for the test to see the first WAIT blocked on A and send the second claim behind it.
      const { ledger, keys } = await ledgerCase(client, 2_000);
      a.link.partition('blackhole');
      const blockedBefore = await blockedOn(a.onPrimary);
      const first = verdict(ledger.claim(token, 'job', 2_000, 'job@2000', { previousTick: 1_000 }));
      await until('the first WAIT to be blocked on A', async () => (await blockedOn(a.onPrimary)) > blockedBefore, 5_000);
      // A runs the second claim once the first WAIT times out; the switch comes as its reply is handed
      // over, while the client has not yet read the first WAIT's answer: the second batch is queued.
      const switched = onReply((reply) => reply.includes('*'), switchToB('mid-stream'));
      const waitsOnB = await waitsOn(b.onPrimary);
      await assert.rejects(ledger.claim(token, 'job', 3_000, 'job@3000', { previousTick: 2_000 }), refusedFor('mid-stream'), 'the second claim stands on A alone: not confirmed');
      await switched;
      assert.match(await first, /^unconfirmed: /, "the first claim's WAIT ran on A, whose replica was held");
      assert.equal(await waitsOn(b.onPrimary), waitsOnB + 1, "the second batch's WAIT ran on B");
      await onlyOnA(keys, 2_000);
      await onlyOnA(keys, 3_000);
    });

    it(`${style} connection: a second claim ran on A before the first WAIT, which is blocked on A when a reconnect resets the connection; the second batch's WAIT, queued behind it, goes to B: not confirmed`, async (t) => {
      const { client, commands, onReply, switchToB } = await connectThroughProxy(style);
      const { ledger, keys } = await ledgerCase(client, 2_000);
      a.link.partition('blackhole');
      let second: Promise<string> | undefined;
      let reset: Promise<void> | undefined;
      // As the first claim's reply is handed over (unread, so its WAIT is not sent yet), the second claim
      // goes out: it reaches A before that WAIT. The switch comes as the second claim's reply is handed
      // over: the first WAIT is blocked on A then, and the second claim's confirmation waits behind it.
      const secondSent = onReply(
        (reply) => reply.startsWith('*'),
        () => {
          second = verdict(ledger.claim(token, 'job', 3_000, 'job@3000', { previousTick: 2_000 }));
          reset = onReply((reply) => reply.startsWith('*'), switchToB('reconnect'));
        },
      );
      const waitsOnB = await waitsOn(b.onPrimary);
      const sentBefore = commands.length;
      const first = await verdict(ledger.claim(token, 'job', 2_000, 'job@2000', { previousTick: 1_000 }));
      await secondSent;
      await reset;
      const secondVerdict = await second!;
      t.diagnostic(`first claim ${first}; second claim ${secondVerdict}`);
      assert.deepEqual(commands.slice(sentBefore, sentBefore + 3), ['evalsha', 'evalsha', 'wait'], 'the second claim went out before the first WAIT');
      assert.match(secondVerdict, /^unconfirmed: .*the connection was re-established/, 'the second claim stands on A alone: not confirmed');
      assert.match(first, /^unconfirmed: /, 'nor the first');
      assert.ok((await waitsOn(b.onPrimary)) > waitsOnB, 'a WAIT ran on B');
      await onlyOnA(keys, 2_000);
      await onlyOnA(keys, 3_000);
    });
  }
});
