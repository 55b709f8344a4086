import type { Socket } from 'node:net';
import { isCluster, type RedisClient } from '../util/redis-client.js';

/**
 * The most commands held back for one socket write. Fewer writes cost less CPU on both sides, but Redis
 * starts on a batch only once it is written. With 32 upserts in flight on the bench's shared 2-core VM,
 * batches of 16 and 32 did about equally (1.57 and 1.62 times BullMQ's rate), 8 less (1.44): two batches
 * in flight keep some of Node's and Redis' work overlapping where a single one would not.
 */
export const MAX_WRITE_BATCH = 16;

/** Per socket: the commands waiting in it since it was corked. */
const corked = new WeakMap<Socket, { waiting: number }>();

/**
 * Sends what `send` writes on `redis` (a standalone or Sentinel client) together with the commands other
 * callers send in the same turn of the event loop, in writes of about {@link MAX_WRITE_BATCH} commands.
 * Callers resumed by one batch of replies each send their next command in the same turn, and each of
 * those writes was a system call of its own: 5 to 7 µs of kernel time per upsert on the bench's VM, about
 * 2 in batches. The socket is corked from the first command and uncorked once the batch is full or the
 * turn's microtasks are done (process.nextTick), so no command waits past the turn it was sent in. `send`
 * writes as ioredis does: at once when the client is ready (a `send` that writes later in the turn, as
 * the durable path does after checking its connection, lands in the batch open then), else into
 * ioredis' offline queue, which this leaves alone.
 */
export function sendBatched<T>(redis: RedisClient, send: () => Promise<T>): Promise<T> {
  if (isCluster(redis) || redis.status !== 'ready') return send();
  const socket = redis.stream;
  let batch = corked.get(socket);
  if (!batch) {
    const opened = { waiting: 0 };
    batch = opened;
    corked.set(socket, opened);
    socket.cork();
    process.nextTick(() => uncork(socket, opened));
  }
  try {
    return send();
  } finally {
    if (++batch.waiting >= MAX_WRITE_BATCH) uncork(socket, batch);
  }
}

/** Writes the batch's commands, once (a full batch is written before its turn ends). */
function uncork(socket: Socket, batch: { waiting: number }): void {
  if (corked.get(socket) !== batch) return;
  corked.delete(socket);
  socket.uncork();
}
