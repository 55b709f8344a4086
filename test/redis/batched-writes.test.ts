import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_WRITE_BATCH, sendBatched } from '../../src/redis/batched-writes.js';
import { useRedis } from '../support/redis-server.js';

describe('sendBatched: the commands of one turn share socket writes (real Redis)', () => {
  const redis = useRedis({ flush: true });

  /** Counts the socket writes (Writable's `_write` and `_writev`, one system call each) while `run` runs. */
  async function writesOf(run: () => Promise<unknown>): Promise<number> {
    await redis.client.ping();
    const socket = redis.client.stream;
    let writes = 0;
    const write = socket._write.bind(socket);
    const writev = socket._writev!.bind(socket);
    // Own properties over the prototype's methods, deleted afterwards.
    socket._write = (...args) => (writes++, write(...args));
    socket._writev = (...args) => (writes++, writev(...args));
    try {
      await run();
    } finally {
      delete (socket as Partial<typeof socket>)._write;
      delete socket._writev;
    }
    return writes;
  }

  it('writes the commands sent in one turn in batches of at most MAX_WRITE_BATCH, and answers each', async () => {
    const count = MAX_WRITE_BATCH * 3 + 1;
    let replies: Array<string | null> = [];
    const writes = await writesOf(async () => {
      replies = await Promise.all(Array.from({ length: count }, (_, i) => sendBatched(redis.client, () => redis.client.set(`k${i}`, `${i}`, 'GET'))));
    });
    assert.equal(writes, 4, 'three full batches and the rest');
    assert.deepEqual(replies, Array.from({ length: count }, () => null));
    assert.deepEqual(await redis.client.mget('k0', `k${count - 1}`), ['0', `${count - 1}`]);
  });

  it('holds no command past its turn: one sent alone is written and answered', async () => {
    const writes = await writesOf(async () => {
      assert.equal(await sendBatched(redis.client, () => redis.client.echo('alone')), 'alone');
      assert.equal(await sendBatched(redis.client, () => redis.client.echo('next')), 'next');
    });
    assert.equal(writes, 2);
  });

  it('leaves a client that is not connected yet to ioredis, which sends once it is', async () => {
    const client = redis.client.duplicate({ lazyConnect: true });
    try {
      assert.equal(await sendBatched(client, () => client.echo('queued')), 'queued');
    } finally {
      client.disconnect();
    }
  });
});
