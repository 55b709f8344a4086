import { createServer, type Server, type Socket } from 'node:net';

/** A TCP server that accepts connections and never answers: Redis as a SIGSTOPped server looks to a client. */
export interface SilentServer {
  url: string;
  /** `performance.now()` when the first connection arrived: where a client's bound starts. */
  firstConnectionAt(): number | undefined;
  close(): Promise<void>;
}

export async function silentServer(): Promise<SilentServer> {
  const sockets = new Set<Socket>();
  let first: number | undefined;
  const server: Server = createServer((socket) => {
    first ??= performance.now();
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    firstConnectionAt: () => first,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
