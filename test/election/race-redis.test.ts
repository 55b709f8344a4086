import { after, before, it } from 'node:test';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { raceAndCheck } from '../support/race.js';

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

it('5 electors on the Redis lock, 10 kills and graceful stops (half at the leader): never two leaders, transitions rise', { timeout: 90_000 }, async (t) => {
  await raceAndCheck({ lock: 'redis', redisUrl: redis.url }, (m) => t.diagnostic(m));
});
