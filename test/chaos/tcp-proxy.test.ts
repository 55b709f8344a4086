import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TcpProxy } from '../support/tcp-proxy.js';

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

async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

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
    await until('the echo', () => client.received() === 'ping');
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
    await until('the held bytes', () => open.received() === 'ac' && late.received() === 'b');
    open.socket.destroy();
    late.socket.destroy();
  });

  it('a resetting heal drops the held bytes and resets the connections', async () => {
    const client = await dial(proxy.port);
    proxy.partition('blackhole');
    client.socket.write('lost');
    await sleep(50);
    proxy.heal('reset');
    await until('the reset', () => client.closed());
    assert.equal(client.received(), '');
    const next = await dial(proxy.port);
    next.socket.write('fresh');
    await until('a new connection to work', () => next.received() === 'fresh');
    next.socket.destroy();
  });

  it('reject resets open connections and refuses new ones until healed', async () => {
    const client = await dial(proxy.port);
    proxy.partition('reject');
    await until('the reset', () => client.closed());
    const refused = await dial(proxy.port);
    await until('the refusal', () => refused.closed());
    proxy.heal();
    const next = await dial(proxy.port);
    next.socket.write('back');
    await until('traffic again', () => next.received() === 'back');
    next.socket.destroy();
  });

  it('onDelivered sees upstream bytes once handed to the client, and held bytes only when a heal delivers them', async () => {
    const delivered: string[] = [];
    const own = await TcpProxy.start({ port: (echo.address() as AddressInfo).port }, { onDelivered: (chunk) => delivered.push(chunk.toString()) });
    try {
      const client = await dial(own.port);
      client.socket.write('x');
      await until('the echo to be delivered', () => delivered.join('') === 'x');
      assert.equal(client.received(), 'x');
      own.partition('blackhole');
      client.socket.write('y');
      await sleep(100);
      assert.equal(delivered.join(''), 'x', 'held bytes are not delivered');
      own.heal('deliver');
      await until('the held bytes', () => delivered.join('') === 'xy' && client.received() === 'xy');
      client.socket.destroy();
    } finally {
      await own.close();
    }
  });
});
