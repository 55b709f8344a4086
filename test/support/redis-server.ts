import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach } from 'node:test';
import { Redis, type RedisOptions } from 'ioredis';
import { useSuiteResource } from './suite-resource.js';
import { until } from './until.js';

/** A private `redis-server` on a free loopback port, started and stopped by the test that owns it. */
export interface TestRedis {
  port: number;
  url: string;
  dir: string;
  /** A new client; the caller quits it. */
  client(): Redis;
  /** Kills the server (SIGKILL when `hard`), keeping its data directory for a restart. */
  stop(hard?: boolean): Promise<void>;
  /** Starts the server again on the same port. */
  restart(): Promise<void>;
  /** Stops the server and removes its directory. */
  close(): Promise<void>;
}

/**
 * Ports for test servers come from below the kernel's ephemeral range (32768 and up), a slice of them per
 * test process, each handed out once. A port the kernel picked (`listen(0)`) could be picked again, by
 * another test file or as a client's source port, while a server that a test stopped waits to restart on
 * it: the restart then meets another test's server there, and its clients that test's data. The slices
 * lie in 10000–19999, so that a Cluster node's bus port (its port + 10000) is in no slice either.
 */
const PORTS_PER_PROCESS = 200;
const FIRST_PORT = 10_000 + (process.pid % 50) * PORTS_PER_PROCESS;
let portsHanded = 0;

/** Whether nothing listens on `port` of 127.0.0.1 now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A free TCP port on 127.0.0.1 that no other test process is handed, and this one only once. */
export async function freePort(): Promise<number> {
  while (portsHanded < PORTS_PER_PROCESS) {
    const port = FIRST_PORT + portsHanded++;
    if (await bindable(port)) return port;
  }
  throw new Error(`this test process used its ${PORTS_PER_PROCESS} ports (${FIRST_PORT}–${FIRST_PORT + PORTS_PER_PROCESS - 1})`);
}

/**
 * Waits until the redis-server `child` answers PING on `port`, on a new connection each time (`ping`: more
 * options for it); fails at once if the process exits, and after `timeoutMs`.
 */
export async function waitForPing(port: number, child: ChildProcess, timeoutMs: number, ping: RedisOptions = {}): Promise<void> {
  await until(`redis-server on ${port} to answer PING`, async () => {
    if (child.exitCode !== null) throw new Error(`${child.spawnargs.join(' ')} exited with ${child.exitCode}`);
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...ping });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      return (await probe.ping()) === 'PONG';
    } catch {
      return false; // not up yet
    } finally {
      probe.disconnect();
    }
  }, timeoutMs);
}

/** Starts a real redis-server for a test. `appendonly` turns on AOF for restart tests. */
export async function startRedis(options: { appendonly?: boolean } = {}): Promise<TestRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-redis-'));
  let port = 0;
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--appendonly', options.appendonly ? 'yes' : 'no', '--maxmemory-policy', 'noeviction', '--loglevel', 'warning'];
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    child = proc;
    await waitForPing(port, proc, 5000);
  };

  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    try {
      await launch();
      break;
    } catch (error) {
      child?.kill('SIGKILL');
      if (attempt >= 4) throw error;
    }
  }

  const stop = async (hard = false): Promise<void> => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill(hard ? 'SIGKILL' : 'SIGTERM');
    });
  };

  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    client: () => new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: null }),
    stop,
    restart: launch,
    close: async () => {
      await stop(true);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A suite's redis-server from {@link useRedis}: there from the suite's `before` hooks on. */
export interface RedisFixture {
  readonly server: TestRedis;
  /** A client on the server, opened on first use and disconnected after the suite. */
  readonly client: Redis;
  /**
   * Runs `close` after the suite, before the client disconnects and the server stops (last added, first
   * run): for what holds a connection to the server (queues, producers), see `SuiteResource.beforeClose`.
   */
  beforeClose(close: () => unknown): void;
}

/**
 * Starts a private redis-server for the calling suite (a `before` hook) and stops it after (an `after`
 * hook). With `flush`, it also empties it before each test.
 */
export function useRedis(options: { appendonly?: boolean; flush?: boolean } = {}): RedisFixture {
  let client: Redis | undefined;
  const server = useSuiteResource('useRedis: the server', () => startRedis({ appendonly: options.appendonly }), async (started) => {
    client?.disconnect();
    await started.close();
  });
  const fixture: RedisFixture = {
    get server(): TestRedis {
      return server.current;
    },
    get client(): Redis {
      return (client ??= server.current.client());
    },
    beforeClose: (close) => server.beforeClose(close),
  };
  if (options.flush) beforeEach(() => fixture.client.flushall());
  return fixture;
}
