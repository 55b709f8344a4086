import { after, before, it } from 'node:test';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { ApiLeaseHistory } from '../../scripts/chaos/lease-history.js';
import { raceAndCheck } from '../support/race.js';

let server: FakeLeaseServer;
before(async () => {
  server = await FakeLeaseServer.start();
});
after(async () => {
  await server.close();
});

it('5 electors on the Kubernetes Lease lock, 10 kills and graceful stops (half at the leader): never two leaders, transitions rise', { timeout: 120_000 }, async (t) => {
  const history = new ApiLeaseHistory(server, 'default', 'race');
  await raceAndCheck({ lock: 'kubernetes', apiServer: server.url }, (m) => t.diagnostic(m), () => Promise.resolve(history.snapshot().writes));
});
