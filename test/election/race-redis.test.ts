import { after, before, it } from 'node:test';
import { startRedis, type TestRedis } from '../support/redis-server.js';
import { RedisLeaseLock } from '../../src/election/redis-lock.js';
import { raceAndCheck, type LockWrite } from '../support/race.js';

let redis: TestRedis;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis.close();
});

it('5 electors on the Redis lock, 10 kills and graceful stops (half at the leader): never two leaders, transitions rise', { timeout: 90_000 }, async (t) => {
  // The lock's history stream, read as the race's electors wrote it (same name and prefix).
  const reader = redis.client();
  const history = new RedisLeaseLock({ connection: reader, name: 'race', identity: 'race-auditor' });
  const lockWrites = async (): Promise<LockWrite[]> => (await history.history()).map((write) => ({ at: write.at, holder: write.record.holderIdentity }));
  try {
    await raceAndCheck({ lock: 'redis', redisUrl: redis.url }, (m) => t.diagnostic(m), lockWrites);
  } finally {
    reader.disconnect();
  }
});
