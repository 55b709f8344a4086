import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { freePort, waitForPing } from './redis-server.js';

/**
 * One `redis-server` process (data node, sentinel or cluster node) of a test topology, on a free loopback
 * port, with the faults the topology tests need: kill, freeze (SIGSTOP) and resume, restart.
 */
export class RedisProcess {
  private child: ChildProcess | undefined;

  private constructor(
    readonly port: number,
    /** Arguments after `redis-server`, with the port already in them (a config file path or flags). */
    private readonly args: (port: number) => string[],
  ) {}

  /** Starts a node on a free port, retrying on another port if the one chosen was taken meanwhile. */
  static async start(args: (port: number) => string[] | Promise<string[]>, options: { ping?: RedisOptions } = {}): Promise<RedisProcess> {
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      const resolved = await args(port);
      const node = new RedisProcess(port, () => resolved);
      try {
        await node.launch(options.ping);
        return node;
      } catch (error) {
        await node.kill();
        if (attempt >= 4) throw error;
      }
    }
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** A direct client to this node (not through Sentinel or Cluster); the caller closes it. */
  client(options: RedisOptions = {}): Redis {
    const client = new Redis({ host: '127.0.0.1', port: this.port, maxRetriesPerRequest: 0, ...options });
    client.on('error', () => undefined);
    return client;
  }

  async launch(ping: RedisOptions = {}): Promise<void> {
    const proc = spawn('redis-server', this.args(this.port), { stdio: 'ignore' });
    this.child = proc;
    await waitForPing(this.port, proc, 10_000, ping);
  }

  /** SIGKILL, as a crash: whatever was not replicated is gone. */
  async kill(): Promise<void> {
    const proc = this.child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    // A frozen process still dies on SIGKILL.
    proc.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP: the node stops answering but keeps its connections, like a long GC pause or a VM stall. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }
}

/** A test topology's teardown: kills its nodes, then removes the directory that holds their files. */
export async function removeTopology(nodes: RedisProcess[], dir: string): Promise<void> {
  await Promise.all(nodes.map((node) => node.kill()));
  await rm(dir, { recursive: true, force: true });
}
