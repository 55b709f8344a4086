import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Queue } from 'bullmq';
import { tickFates } from '../../bench/tick-fates.js';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { JOB_DEFAULTS } from '../../src/scheduling/schema.js';
import { LuaScript } from '../../src/util/lua.js';
import { ticksBetween } from '../support/ledger-audit.js';
import { explainFailure, killAll, startInstance, type Instance } from '../support/instance.js';
import { useRedis } from '../support/redis-server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { until } from '../support/until.js';

const JOBS = new URL('../fixtures/jobs-handover/', import.meta.url).pathname;
const JOB = 'handover';
/** The old leader releases this long before tick T; the new one's takeover read is then held until after T. */
const RELEASE_BEFORE_MS = 2_000;
/** How late after T the held read reaches the new leader (issue 31: its take-back came 11 ms after T). */
const LATE_MS = 11;
/**
 * A renew deadline longer than the hold, so that the new leader keeps its lease while the proxy holds its
 * traffic; a release does not wait for the lease to expire. Staged 4 s ahead, runs past T are staged by then.
 */
const ENV = { LEASEBEAT_JOBS_DIR: JOBS, LEASEBEAT_STAGE_AHEAD: '4s', LEASEBEAT_LEASE_DURATION: '6s', LEASEBEAT_RENEW_DEADLINE: '5s', LEASEBEAT_RETRY_PERIOD: '250ms' };
/** How the takeover read goes on the wire (EVALSHA, or EVAL with its source the first time). */
const takeOverScript = new LuaScript(new URL('../../src/ledger/lua/takeOver.lua', import.meta.url));
const isTakeover = (chunk: Buffer): boolean => chunk.includes(takeOverScript.sha) || chunk.includes('What a new leader reads of each job it takes over');

describe('a graceful handover just before a tick (issue 31, finding 3)', () => {
  const redis = useRedis();
  const instances: Instance[] = [];
  let proxy: TcpProxy | undefined;
  redis.beforeClose(async () => {
    killAll(instances);
    await proxy?.close();
  });

  it('the tick due at the handover runs exactly once, as does every tick around it: none is skipped', { timeout: 90_000 }, async () => {
    const ledger = new TickLedger(redis.client, new KeySpace());
    const old = startInstance('old', { ...ENV, LEASEBEAT_REDIS_URL: redis.server.url });
    instances.push(old);
    await old.waitForLog((line) => line.msg === 'fence raised; producing', 30_000);

    // The next leader talks to Redis through a proxy, which holds its traffic from its takeover read of the
    // job (sent before T, so the read describes the ledger before T) until LATE_MS after T.
    const hold: { until?: number; readSentAt?: number } = {};
    proxy = await TcpProxy.start({ port: redis.server.port }, {
      onClientData: (chunk) => {
        if (hold.until === undefined || hold.readSentAt !== undefined || !isTakeover(chunk)) return;
        hold.readSentAt = Date.now();
        proxy!.partition('blackhole');
        setTimeout(() => proxy!.heal('deliver'), hold.until - hold.readSentAt);
      },
    });
    const next = startInstance('next', { ...ENV, LEASEBEAT_REDIS_URL: `redis://127.0.0.1:${proxy.port}` });
    instances.push(next);
    await next.waitForLog((line) => line.msg === 'attempting to acquire the leader lease', 30_000);

    // T: a tick staged with the one after it, far enough ahead for the release to come RELEASE_BEFORE_MS before it.
    const T = await until('a staged tick with room for the release', async () => {
      const staged = ((await ledger.jobState(JOB)).lastScheduledTick ?? 0) - 1_000;
      return staged - Date.now() >= RELEASE_BEFORE_MS + 300 && staged;
    }, 15_000);
    await until(`${RELEASE_BEFORE_MS} ms before T`, () => Date.now() >= T - RELEASE_BEFORE_MS, 15_000);
    hold.until = T + LATE_MS;
    old.child.kill('SIGTERM');
    await explainFailure(next.waitForLog((line) => line.msg === 'fence raised; producing', 15_000), instances);
    const readSentAt = await until('the next leader’s takeover read', () => hold.readSentAt, 15_000);
    assert.ok(readSentAt < T, `the takeover read was sent ${readSentAt - T} ms after T: too late to hold it across the tick`);

    // Audited from Redis: every tick from 2 s before T to 2 s after it ran once, none was skipped.
    const audited = ticksBetween(T - 2_000, T + 2_000, 1_000);
    const queue = new Queue(JOB_DEFAULTS.queue, { connection: redis.client });
    try {
      const fates = () => tickFates(redis.client, ledger, queue, JOB, audited);
      const describeTicks = async (): Promise<string> => {
        const lines = await Promise.all(audited.map(async (t) => `${t - T} ms: ledger ${await ledger.tickState(JOB, t)}, BullMQ ${await queue.getJobState(`${JOB}@${t}`)}`));
        return [...lines, `skipped ranges ${JSON.stringify(await ledger.skippedRanges(JOB))}`].join('\n');
      };
      await explainFailure(until('every audited tick to be run or skipped', async () => (await fates()).unrun === 0, 20_000), instances, describeTicks);
      assert.deepEqual(await fates(), { ticks: audited.length, ran: audited.length, skipped: {}, unrun: 0, twice: 0 }, await describeTicks());
      assert.equal(await ledger.tickState(JOB, T), `enqueued|${JOB}@${T}`, 'T is recorded enqueued: its staged run ran');
    } finally {
      await queue.close();
    }
  });
});
