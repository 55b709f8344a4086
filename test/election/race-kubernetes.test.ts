import { after, before, it } from 'node:test';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { raceAndCheck, type LockWrite } from '../support/race.js';

let server: FakeLeaseServer;
before(async () => {
  server = await FakeLeaseServer.start();
});
after(async () => {
  await server.close();
});

it('5 electors on the Kubernetes Lease lock, 10 kills and graceful stops (half at the leader): never two leaders, transitions rise', { timeout: 120_000 }, async (t) => {
  const lockWrites = (): Promise<LockWrite[]> =>
    Promise.resolve(server.writeHistory().filter((write) => write.name === 'race').map((write) => ({ at: write.at, holder: write.op === 'delete' ? '' : (write.spec.holderIdentity ?? '') })));
  await raceAndCheck({ lock: 'kubernetes', apiServer: server.url }, (m) => t.diagnostic(m), lockWrites);
});
