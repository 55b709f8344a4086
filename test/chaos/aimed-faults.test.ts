import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CommandWatch, unquote } from '../../scripts/chaos/aimed-faults.js';
import { useRedis } from '../support/redis-server.js';

describe('chaos: the MONITOR watch that aimed kills wait on', () => {
  const redis = useRedis();

  it("reads Redis' own quoting back: quotes, newlines, binary bytes", () => {
    assert.deepEqual(unquote(' "HSET" "k" "a \\"b\\"\\r\\n\\\\" "\\x00\\xff"'), ['HSET', 'k', 'a "b"\r\n\\', '\x00\xff']);
  });

  it('sees the commands scripts run, with their arguments, from the moment it is opened', async () => {
    const client = redis.server.client();
    await client.set('before', '1');
    const watch = await CommandWatch.open(redis.server);
    try {
      const claim = watch.next((args) => args[0] === 'HSET' && args[1] === 'ledger', 2000);
      await client.eval("redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1", 1, 'ledger', '1000', 'claimed|g|1|job@1000 "x"\n');
      const seen = await claim;
      assert.deepEqual(seen?.args, ['HSET', 'ledger', '1000', 'claimed|g|1|job@1000 "x"\n']);
      assert.ok(Math.abs(seen.at - Date.now()) < 1000, 'at the node clock, in ms');
      // Kept: a command already gone by is found from a mark taken before it.
      const from = watch.mark();
      await client.set('after', 'v');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual((await watch.next((args) => args[1] === 'after', 10, from))?.args, ['set', 'after', 'v']);
      assert.equal(await watch.next((args) => args[1] === 'before', 10, 0), undefined, 'nothing from before it was opened');
    } finally {
      watch.close();
      client.disconnect();
    }
  });
});
