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

/** An address the proxy forwards to; the host defaults to 127.0.0.1. */
export interface ProxyTarget {
  host?: string;
  port: number;
}

/**
 * How {@link TcpProxy.switchTo} moves the open connections to a new target (new connections always go
 * there). `mid-stream`: every client socket stays open and only its upstream is replaced, by a new
 * connection to the new target, as by a middlebox that re-points a flow: the client never notices, and
 * what it sends from then on (and what it sent that was not forwarded yet) reaches the new server.
 * `reconnect`: every client connection is reset, as at a failover behind a virtual IP; the client
 * reconnects, to the new target.
 */
export type SwitchMode = 'mid-stream' | 'reconnect';

/**
 * What a `mid-stream` switch does with what the old upstream still owes the client: replies to requests it
 * got before the switch, and bytes a blackhole holds. `drop`: the old connection is closed at once and all
 * of that is lost; a client that counts replies (Redis's) then takes the next reply, the new server's, for
 * the lost one. `deliver`: the old connection is half-closed and finishes: its bytes still reach the
 * client, all before any of the new server's, which wait until it has closed (a server that never closes
 * it holds them for ever). Redis answers what it read before the half-close, except a blocked command
 * (WAIT, BLPOP): that reply never comes.
 */
export type StaleReplies = 'drop' | 'deliver';

export interface TcpProxyOptions {
  /**
   * Sees every chunk a client sends, before it is forwarded or held (for request counting), with the
   * number of its connection (1, 2, 3... in the order accepted).
   */
  onClientData?: (chunk: Buffer, connection: number) => void;
  /**
   * Sees every chunk the upstream sends, once it has been handed to the client's socket (not while it is
   * held by a partition), with the number of its connection: a test can act right after a reply reached
   * the process (switch, say: see {@link TcpProxy.switchTo}).
   */
  onDelivered?: (chunk: Buffer, connection: number) => void;
}

/** One client connection and its upstream twin. */
interface Link {
  id: number;
  client: Socket;
  /** Where the client's bytes go: undefined until a partition that held the connection ends. */
  upstream: Socket | undefined;
  /** Upstreams a delivering switch replaced, oldest first, still finishing what they owe the client. */
  draining: Socket[];
  /** Bytes of an upstream that may reach the client only once every older one has closed. */
  queued: Map<Socket, Buffer[]>;
  toUpstream: Buffer[];
  toClient: Buffer[];
  clientGone: boolean;
  upstreamGone: boolean;
}

/**
 * A TCP proxy on 127.0.0.1 in front of one upstream address, which a test can partition and heal, or
 * switch to another address. Give every process its own proxy to partition that process alone.
 */
export class TcpProxy {
  private readonly links = new Set<Link>();
  private mode: 'open' | PartitionMode = 'open';
  private accepted = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private current: Required<ProxyTarget>,
    private readonly options: TcpProxyOptions,
  ) {}

  /** Starts a proxy on a free loopback port that forwards to `target`. */
  static async start(target: ProxyTarget, options: TcpProxyOptions = {}): Promise<TcpProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const proxy = new TcpProxy(server, (server.address() as AddressInfo).port, { host: target.host ?? '127.0.0.1', port: target.port }, options);
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** Where new connections go. */
  get target(): Required<ProxyTarget> {
    return { ...this.current };
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

  /**
   * Forwards to `target` from now on: new connections, and the open ones as `mode` says (see
   * {@link SwitchMode}; `staleReplies`, default `drop`, see {@link StaleReplies}). Synchronous, so a test
   * can place it between two requests: from `onClientData`, the chunk at hand is the first to go to the
   * new target; from `onDelivered`, the first bytes the client sends after that delivery are (the callback
   * runs before the proxy reads again, when the write completed at once: a reply that fits the socket
   * buffer). A switch during a blackhole connects to the new target at the heal.
   */
  switchTo(target: ProxyTarget, mode: SwitchMode, options: { staleReplies?: StaleReplies } = {}): void {
    this.current = { host: target.host ?? '127.0.0.1', port: target.port };
    for (const link of [...this.links]) {
      if (mode === 'reconnect') this.drop(link);
      else this.repoint(link, options.staleReplies ?? 'drop');
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
    const link: Link = {
      id: ++this.accepted, client, upstream: undefined, draining: [], queued: new Map(), toUpstream: [], toClient: [], clientGone: false, upstreamGone: false,
    };
    this.links.add(link);
    client.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      this.options.onClientData?.(chunk, link.id);
      // The callback may have reset the connection (a reconnecting switch, a rejecting partition).
      if (!this.links.has(link)) return;
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
    const upstream = connect(this.current.port, this.current.host);
    link.upstream = upstream;
    link.upstreamGone = false;
    upstream.setNoDelay(true);
    upstream.on('connect', () => {
      if (this.mode !== 'open' || link.upstream !== upstream) return;
      for (const chunk of link.toUpstream.splice(0)) upstream.write(chunk);
      if (link.clientGone) upstream.end();
    });
    upstream.on('data', (chunk: Buffer) => {
      // Replaced upstreams: a dropped one is ignored, a newer one waits for the older ones to finish.
      if (upstream === (link.draining[0] ?? link.upstream)) this.toClient(link, chunk);
      else if (upstream === link.upstream || link.draining.includes(upstream)) {
        const queue = link.queued.get(upstream) ?? [];
        queue.push(chunk);
        link.queued.set(upstream, queue);
      }
    });
    upstream.on('error', () => undefined);
    upstream.on('close', () => {
      if (link.draining.includes(upstream)) return this.finishDraining(link);
      if (link.upstream !== upstream) return;
      link.upstreamGone = true;
      if (this.mode !== 'blackhole') this.drop(link);
    });
  }

  /** Hands upstream bytes to the client, or holds them while a blackhole is in force. */
  private toClient(link: Link, chunk: Buffer): void {
    if (this.mode === 'open' && !link.clientGone) this.deliver(link, chunk);
    else link.toClient.push(chunk);
  }

  /** A mid-stream switch of one connection: a new upstream at the current target; the old one drops or finishes. */
  private repoint(link: Link, stale: StaleReplies): void {
    const old = link.upstream;
    link.upstream = undefined;
    link.upstreamGone = false;
    if (stale === 'drop') {
      for (const socket of [old, ...link.draining]) socket?.destroy();
      link.draining = [];
      link.queued.clear();
      link.toClient = [];
    } else if (old && !old.connecting && !old.destroyed) {
      // Half-closed, it answers what it has read, then closes (see finishDraining).
      link.draining.push(old);
      old.end();
    } else {
      // Not connected yet: nothing was sent to it, so it owes nothing (its unsent bytes go to the new one).
      old?.destroy();
    }
    if (this.mode === 'open') this.connectUpstream(link);
  }

  /** A draining upstream closed: the next ones' bytes go on to the client, up to one still open. */
  private finishDraining(link: Link): void {
    while (link.draining[0]?.destroyed) {
      link.draining.shift();
      const next = link.draining[0] ?? link.upstream;
      if (!next) return;
      for (const chunk of link.queued.get(next) ?? []) this.toClient(link, chunk);
      link.queued.delete(next);
    }
  }

  /** Lets a held connection go on: late bytes both ways, then any close that happened meanwhile. */
  private release(link: Link): void {
    if (!link.upstream) {
      // Never connected, or switched during the partition: connect now (held replies of a switched-away
      // upstream still go to the client below).
      if (link.clientGone && link.toUpstream.length === 0) return this.drop(link);
      this.connectUpstream(link);
    } else if (!link.upstreamGone && link.upstream.readyState === 'open') {
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
    link.queued.clear();
    for (const socket of link.draining.splice(0)) socket.destroy();
    // An RST, as a firewall sends; a socket already half-closed is only destroyed (Node 20 spins in
    // resetAndDestroy() on one).
    if (link.client.readyState === 'open') link.client.resetAndDestroy();
    else link.client.destroy();
    link.upstream?.destroy();
  }
}
