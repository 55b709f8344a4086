import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * How a partition treats traffic. `blackhole`: connections stay open but nothing gets through in either
 * direction (what is sent is held, as TCP would keep retransmitting it); new connections are accepted
 * and held too. `reject`: every connection is reset and new ones are refused, as by a firewall REJECT.
 */
export type PartitionMode = 'blackhole' | 'reject';

/**
 * How a blackhole partition ends. `deliver`: the held bytes arrive late, in order, as after a short
 * outage that TCP retransmission bridges. `reset`: held bytes are lost and every connection is reset,
 * as after an outage longer than the peers' TCP timeouts.
 */
export type HealMode = 'deliver' | 'reset';

export interface TcpProxyOptions {
  /**
   * Sees every chunk a client sends, before it is forwarded or held (for request counting), with the
   * number of its connection (1, 2, 3... in the order accepted).
   */
  onClientData?: (chunk: Buffer, connection: number) => void;
  /**
   * Sees every chunk the upstream sends, once it has been handed to the client's socket (not while it is
   * held by a partition), with the number of its connection: a test can act right after a reply reached
   * the process.
   */
  onDelivered?: (chunk: Buffer, connection: number) => void;
}

/** One client connection and its upstream twin. */
interface Link {
  id: number;
  client: Socket;
  upstream: Socket | undefined;
  toUpstream: Buffer[];
  toClient: Buffer[];
  clientGone: boolean;
  upstreamGone: boolean;
}

/**
 * A TCP proxy on 127.0.0.1 in front of one upstream address, which a test can partition and heal. Give
 * every process its own proxy to partition that process alone.
 */
export class TcpProxy {
  private readonly links = new Set<Link>();
  private mode: 'open' | PartitionMode = 'open';
  private accepted = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
    private readonly options: TcpProxyOptions,
  ) {}

  /** Starts a proxy on a free loopback port that forwards to `target`. */
  static async start(target: { host?: string; port: number }, options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const proxy = new TcpProxy(server, (server.address() as AddressInfo).port, { host: target.host ?? '127.0.0.1', port: target.port }, options);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** `open`, or the partition in force. */
  get state(): 'open' | PartitionMode {
    return this.mode;
  }

  /** Open client connections. */
  get connections(): number {
    return this.links.size;
  }

  /** Cuts the proxied process off from its upstream until `heal`. */
  partition(mode: PartitionMode): void {
    this.mode = mode;
    if (mode === 'reject') for (const link of [...this.links]) this.drop(link);
  }

  /** Ends a partition; after a blackhole, `how` decides whether the held bytes arrive or are lost. */
  heal(how: HealMode = 'deliver'): void {
    const wasBlackhole = this.mode === 'blackhole';
    this.mode = 'open';
    if (!wasBlackhole) return;
    for (const link of [...this.links]) {
      if (how === 'reset') this.drop(link);
      else this.release(link);
    }
  }

  /** Stops listening and resets every connection. */
  async close(): Promise<void> {
    for (const link of [...this.links]) this.drop(link);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.mode === 'reject') {
      client.resetAndDestroy();
      return;
    }
    const link: Link = { id: ++this.accepted, client, upstream: undefined, toUpstream: [], toClient: [], clientGone: false, upstreamGone: false };
    this.links.add(link);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      this.options.onClientData?.(chunk, link.id);
      if (this.mode === 'open' && link.upstream && link.upstream.readyState === 'open') link.upstream.write(chunk);
      else link.toUpstream.push(chunk);
    });
    client.on('error', () => undefined);
    client.on('close', () => {
      link.clientGone = true;
      // While blackholed the client's last bytes are still in flight: they are delivered (or lost) at heal.
      if (this.mode !== 'blackhole') this.drop(link);
    });
    if (this.mode === 'open') this.connectUpstream(link);
  }

  private connectUpstream(link: Link): void {
    const upstream = connect(this.target.port, this.target.host);
    link.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('connect', () => {
      if (this.mode !== 'open') return;
      for (const chunk of link.toUpstream.splice(0)) upstream.write(chunk);
      if (link.clientGone) upstream.end();
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.mode === 'open' && !link.clientGone) this.deliver(link, chunk);
      else link.toClient.push(chunk);
    });
    upstream.on('error', () => undefined);
    upstream.on('close', () => {
      link.upstreamGone = true;
      if (this.mode !== 'blackhole') this.drop(link);
    });
  }

  /** Lets a held connection go on: late bytes both ways, then any close that happened meanwhile. */
  private release(link: Link): void {
    if (!link.upstream) {
      if (link.clientGone && link.toUpstream.length === 0) this.drop(link);
      else this.connectUpstream(link);
      return;
    }
    if (!link.upstreamGone && link.upstream.readyState === 'open') {
      for (const chunk of link.toUpstream.splice(0)) link.upstream.write(chunk);
      if (link.clientGone) link.upstream.end();
    }
    if (!link.clientGone) {
      for (const chunk of link.toClient.splice(0)) this.deliver(link, chunk);
      if (link.upstreamGone) link.client.end();
    }
    if (link.clientGone && link.upstreamGone) this.drop(link);
  }

  private deliver(link: Link, chunk: Buffer): void {
    link.client.write(chunk, () => this.options.onDelivered?.(chunk, link.id));
  }

  private drop(link: Link): void {
    this.links.delete(link);
    link.toUpstream = [];
    link.toClient = [];
    // An RST, as a firewall sends; a socket already half-closed is only destroyed (Node 20 spins in
    // resetAndDestroy() on one).
    if (link.client.readyState === 'open') link.client.resetAndDestroy();
    else link.client.destroy();
    link.upstream?.destroy();
  }
}
