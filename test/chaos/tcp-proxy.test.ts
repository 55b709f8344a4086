import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, afterEach, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisProcess } from '../support/redis-process.js';
import { TcpProxy, type TcpProxyOptions } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

/** A client connection whose received bytes and closure the test can watch. */
interface Client {
  socket: Socket;
  received(): string;
  closed(): boolean;
}

async function dial(port: number): Promise<Client> {
  const socket = connect(port, '127.0.0.1');
  let data = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  // A refused connection may be reset before it reports being connected.
  await new Promise<void>((resolve) => {
    socket.once('connect', () => resolve());
    socket.once('close', () => resolve());
  });
  return { socket, received: () => data, closed: () => closed };
}

/** The waits on sockets here: 2 s at most, polled every 5 ms (a loopback socket answers within milliseconds). */
const soon = (what: string, probe: () => boolean): Promise<true> => until(what, probe, 2_000, 5);

describe('TcpProxy: partitions for the chaos suite', () => {
  let echo: Server;
  let proxy: TcpProxy;

  const echoed = new Set<Socket>();

  before(async () => {
    echo = createServer((socket) => {
      echoed.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => echoed.delete(socket));
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', () => resolve()));
    proxy = await TcpProxy.start({ port: (echo.address() as AddressInfo).port });
  });
  after(async () => {
    await proxy.close();
    for (const socket of echoed) socket.destroy();
    await new Promise<void>((resolve) => echo.close(() => resolve()));
  });

  it('forwards both ways while open', async () => {
    const client = await dial(proxy.port);
    client.socket.write('ping');
    await soon('the echo', () => client.received() === 'ping');
    client.socket.destroy();
  });

  it('blackhole holds bytes both ways, also on new connections; a delivering heal lets them through in order', async () => {
    const open = await dial(proxy.port);
    proxy.partition('blackhole');
    open.socket.write('a');
    const late = await dial(proxy.port);
    late.socket.write('b');
    await sleep(100);
    assert.equal(open.received(), '', 'nothing gets through a blackhole');
    assert.equal(late.received(), '');
    proxy.heal('deliver');
    open.socket.write('c');
    await soon('the held bytes', () => open.received() === 'ac' && late.received() === 'b');
    open.socket.destroy();
    late.socket.destroy();
  });

  it('a resetting heal drops the held bytes and resets the connections', async () => {
    const client = await dial(proxy.port);
    proxy.partition('blackhole');
    client.socket.write('lost');
    await sleep(50);
    proxy.heal('reset');
    await soon('the reset', () => client.closed());
    assert.equal(client.received(), '');
    const next = await dial(proxy.port);
    next.socket.write('fresh');
    await soon('a new connection to work', () => next.received() === 'fresh');
    next.socket.destroy();
  });

  it('reject resets open connections and refuses new ones until healed', async () => {
    const client = await dial(proxy.port);
    proxy.partition('reject');
    await soon('the reset', () => client.closed());
    const refused = await dial(proxy.port);
    await soon('the refusal', () => refused.closed());
    proxy.heal();
    const next = await dial(proxy.port);
    next.socket.write('back');
    await soon('traffic again', () => next.received() === 'back');
    next.socket.destroy();
  });

  it('onDelivered sees upstream bytes once handed to the client, and held bytes only when a heal delivers them', async () => {
    const delivered: string[] = [];
    const own = await TcpProxy.start({ port: (echo.address() as AddressInfo).port }, { onDelivered: (chunk) => delivered.push(chunk.toString()) });
    try {
      const client = await dial(own.port);
      client.socket.write('x');
      // Handed to the client's socket is not yet read by the client (in this process, a poll later).
      await soon('the echo to be delivered and read', () => delivered.join('') === 'x' && client.received() === 'x');
      own.partition('blackhole');
      client.socket.write('y');
      await sleep(100);
      assert.equal(delivered.join(''), 'x', 'held bytes are not delivered');
      own.heal('deliver');
      await soon('the held bytes', () => delivered.join('') === 'xy' && client.received() === 'xy');
      client.socket.destroy();
    } finally {
      await own.close();
    }
  });
});

/** A Redis command in RESP, as a client writes it. */
const command = (...args: string[]): string => `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;
/** The RESP reply to GET of a one-character value. */
const bulk = (value: string): string => `$${value.length}\r\n${value}\r\n`;

describe('TcpProxy.switchTo: one connection moved between two real redis-servers', () => {
  let a: RedisProcess;
  let b: RedisProcess;
  let onA: Redis;
  let onB: Redis;
  const proxies: TcpProxy[] = [];
  const clients: Redis[] = [];

  /** A proxy in front of A, closed after the test. */
  async function proxyToA(options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const proxy = await TcpProxy.start({ port: a.port }, options);
    proxies.push(proxy);
    return proxy;
  }

  /** An ioredis client through `proxy`, ready, closed after the test. */
  async function clientOf(proxy: TcpProxy): Promise<Redis> {
    const client = new Redis({ host: '127.0.0.1', port: proxy.port });
    client.on('error', () => undefined);
    clients.push(client);
    await client.ping();
    return client;
  }

  /** Calls of `name` a server has run (INFO commandstats). */
  const calls = async (server: Redis, name: string): Promise<number> => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(await server.info('commandstats'))?.[1] ?? 0);

  before(async () => {
    const node = (port: number): string[] => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    [a, b] = await Promise.all([RedisProcess.start(node), RedisProcess.start(node)]);
    onA = a.client();
    onB = b.client();
    await Promise.all([onA.set('k', 'a'), onB.set('k', 'b')]);
  });
  afterEach(async () => {
    a.resume();
    for (const client of clients.splice(0)) client.disconnect();
    for (const proxy of proxies.splice(0)) await proxy.close();
  });
  after(async () => {
    onA.disconnect();
    onB.disconnect();
    await Promise.all([a.kill(), b.kill()]);
  });

  it("mid-stream: the same client socket reads A's value before and B's after; new connections go to B", async () => {
    const proxy = await proxyToA();
    const client = await dial(proxy.port);
    client.socket.write(command('GET', 'k'));
    await soon("A's reply", () => client.received() === bulk('a'));
    proxy.switchTo({ port: b.port }, 'mid-stream');
    assert.equal(proxy.target.port, b.port);
    client.socket.write(command('GET', 'k'));
    await soon("B's reply on the same socket", () => client.received() === bulk('a') + bulk('b'));
    assert.equal(client.closed(), false);
    assert.equal(proxy.connections, 1);
    const next = await dial(proxy.port);
    next.socket.write(command('GET', 'k'));
    await soon('a new connection to reach B', () => next.received() === bulk('b'));
    client.socket.destroy();
    next.socket.destroy();
  });

  it('switched from onDelivered: a write acknowledged by A, then its WAIT runs on B, over the same connection', async () => {
    let armed = false;
    const proxy = await proxyToA({
      onDelivered: (chunk) => {
        // Right after the SET's +OK reached the client, before it can send its WAIT.
        if (armed && chunk.toString() === '+OK\r\n') {
          armed = false;
          proxy.switchTo({ port: b.port }, 'mid-stream');
        }
      },
    });
    const client = await clientOf(proxy);
    let reconnects = 0;
    client.on('reconnecting', () => reconnects++);
    const [waitsOnA, waitsOnB] = [await calls(onA, 'wait'), await calls(onB, 'wait')];
    armed = true;
    assert.equal(await client.set('acked', '1'), 'OK');
    assert.equal(await client.wait(0, 0), 0);
    assert.deepEqual(await client.config('GET', 'port'), ['port', String(b.port)], 'the connection now reaches B');
    assert.equal(await onA.get('acked'), '1', 'A acknowledged the write');
    assert.equal(await onB.get('acked'), null);
    assert.deepEqual([await calls(onA, 'wait') - waitsOnA, await calls(onB, 'wait') - waitsOnB], [0, 1], 'the WAIT ran on B, not A');
    assert.equal(reconnects, 0, 'one connection throughout');
    assert.equal(proxy.connections, 1);
  });

  it('switched from onClientData: the chunk at hand is the first to reach B', async () => {
    let armed = false;
    const proxy = await proxyToA({
      onClientData: (chunk) => {
        // ioredis writes command names in lower case.
        if (armed && /\r\nget\r\n/i.test(chunk.toString())) {
          armed = false;
          proxy.switchTo({ port: b.port }, 'mid-stream');
        }
      },
    });
    const client = await clientOf(proxy);
    const getsOnA = await calls(onA, 'get');
    armed = true;
    assert.equal(await client.set('sent', '1'), 'OK');
    assert.equal(await client.get('sent'), null, 'the GET ran on B, which never had the key');
    assert.equal(await onA.get('sent'), '1', 'the SET ran on A');
    assert.equal(await calls(onA, 'get'), getsOnA + 1, "A ran no GET of the client's (only this check's)");
    assert.equal(proxy.connections, 1);
  });

  it("staleReplies 'deliver': a reply A still owed reaches the client, before any of B's", async () => {
    const seen: string[] = [];
    const proxy = await proxyToA({ onClientData: (chunk) => seen.push(chunk.toString()) });
    const client = await dial(proxy.port);
    a.freeze();
    client.socket.write(command('GET', 'k'));
    // Seen, so forwarded to A (synchronously after the callback); frozen, A has not answered.
    await soon('the GET to be forwarded to A', () => seen.length === 1);
    proxy.switchTo({ port: b.port }, 'mid-stream', { staleReplies: 'deliver' });
    const getsOnB = await calls(onB, 'get');
    client.socket.write(command('GET', 'k'));
    await until('B to have answered', async () => (await calls(onB, 'get')) > getsOnB);
    await sleep(50);
    assert.equal(client.received(), '', "B's reply waits for A's");
    a.resume();
    await soon('both replies, in order', () => client.received() === bulk('a') + bulk('b'));
    client.socket.destroy();
  });

  it("staleReplies 'drop': the reply A still owed is lost; the next reply the client reads is B's", async () => {
    const seen: string[] = [];
    const proxy = await proxyToA({ onClientData: (chunk) => seen.push(chunk.toString()) });
    const client = await dial(proxy.port);
    a.freeze();
    client.socket.write(command('GET', 'k'));
    await soon('the GET to be forwarded to A', () => seen.length === 1);
    proxy.switchTo({ port: b.port }, 'mid-stream', { staleReplies: 'drop' });
    client.socket.write(command('GET', 'k'));
    await soon("B's reply", () => client.received() === bulk('b'));
    a.resume();
    // A serves again (and has read what the dropped connection sent it): still nothing of A's arrives.
    assert.equal(await onA.ping(), 'PONG');
    await sleep(50);
    assert.equal(client.received(), bulk('b'));
    assert.equal(client.closed(), false);
    client.socket.destroy();
  });

  it('reconnect: every client connection is reset, and the client reconnects to B', async () => {
    const proxy = await proxyToA();
    const client = await clientOf(proxy);
    const raw = await dial(proxy.port);
    assert.equal(await client.get('k'), 'a');
    let reconnects = 0;
    client.on('reconnecting', () => reconnects++);
    proxy.switchTo({ port: b.port }, 'reconnect');
    await soon('the raw connection to be reset', () => raw.closed());
    assert.equal(await client.get('k'), 'b', 'ioredis reconnected, to B');
    assert.ok(reconnects >= 1);
  });

  it('a mid-stream switch during a blackhole connects to the new target at the heal', async () => {
    const proxy = await proxyToA();
    const client = await dial(proxy.port);
    client.socket.write(command('GET', 'k'));
    await soon("A's reply", () => client.received() === bulk('a'));
    proxy.partition('blackhole');
    proxy.switchTo({ port: b.port }, 'mid-stream');
    client.socket.write(command('GET', 'k'));
    await sleep(50);
    assert.equal(client.received(), bulk('a'), 'held by the blackhole');
    proxy.heal('deliver');
    await soon("B's reply", () => client.received() === bulk('a') + bulk('b'));
    client.socket.destroy();
  });
});
