import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { KeySpace } from '../../src/redis/keys.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { HistoryReader, kubernetesHistoryNote, TermFolder, type HistorySnapshot, type LeaseWrite } from '../../src/serving/history.js';
import { startRedis, useRedis } from '../support/redis-server.js';
import { seedHistory, type SeededHistory } from './fixture.js';

describe('HistoryReader over real ledger, BullMQ and lease records', () => {
  const redis = useRedis();
  let seeded: SeededHistory;
  let history: HistorySnapshot;
  before(async () => {
    seeded = await seedHistory(redis.server);
    history = await seeded.reader.read();
  });
  redis.beforeClose(() => seeded?.close());

  it("gives each job's newest ticks, oldest first, with the fate and lag of each", () => {
    const heartbeat = history.jobs.find((job) => job.name === 'heartbeat')!;
    assert.equal(heartbeat.queue, 'ops');
    const at = (tick: number) => heartbeat.ticks.find((t) => t.tick === tick)!;
    const { ticks } = seeded;
    assert.equal(at(ticks.heartbeat.late).fate, 'late');
    assert.equal(at(ticks.heartbeat.late).lagMs, 2_500);
    assert.equal(at(ticks.heartbeat.failed).fate, 'failed');
    assert.equal(at(ticks.heartbeat.failed).reason, 'upstream answered 503');
    assert.deepEqual(at(ticks.heartbeat.skipped), { tick: ticks.heartbeat.skipped, fate: 'skipped', reason: 'overlap' });
    assert.equal(at(ticks.heartbeat.pending).fate, 'pending');
    assert.equal(at(ticks.heartbeat.pending).jobId, `heartbeat@${ticks.heartbeat.pending}`);
    const ran = at(ticks.heartbeat.ran);
    assert.equal(ran.fate, 'ran');
    assert.ok(ran.lagMs! < 1_000 && ran.startLagMs! >= ran.lagMs! && ran.durationMs! >= 0, JSON.stringify(ran));
    const range = heartbeat.ticks.find((t) => t.count === 5)!;
    assert.deepEqual({ fate: range.fate, reason: range.reason, span: range.to! - range.tick }, { fate: 'skipped', reason: 'missed-window', span: 4 * 60_000 });
    assert.deepEqual(heartbeat.ticks.map((t) => t.tick), heartbeat.ticks.map((t) => t.tick).sort((a, b) => a - b));
    // 30 minutes: 23 runs, 1 overlap skip, 1 range of 5, 1 pending claim.
    assert.equal(heartbeat.ticks.length, 26);
    const sync = history.jobs.find((job) => job.name === 'invoice-sync')!.ticks;
    assert.deepEqual(sync.map((t) => [t.fate, t.manual ?? false]), [...Array.from({ length: 6 }, () => ['ran', false]), ['ran', true]]);
  });

  it('judges a run staged ahead of its tick by its start: its add is early by design', () => {
    const ticks = history.jobs.find((job) => job.name === 'staged-sync')!.ticks;
    const at = (tick: number) => ticks.find((t) => t.tick === tick)!;
    const onTime = at(seeded.staged.onTime);
    assert.deepEqual([onTime.fate, onTime.lagMs], ['ran', -300], 'added 300 ms ahead, promoted and started at its tick');
    assert.ok(onTime.startLagMs! >= 0, JSON.stringify(onTime));
    const late = at(seeded.staged.late);
    assert.deepEqual([late.fate, late.lagMs], ['late', -2_000], 'added on time, started 10 s after its tick');
    assert.ok(late.startLagMs! >= 10_000, JSON.stringify(late));
  });

  it('shows a manual run (leasebeat trigger) among the ticks, placed at its add, with its start lag and no enqueue lag', () => {
    const ticks = history.jobs.find((job) => job.name === 'invoice-sync')!.ticks;
    const manual = ticks.find((t) => t.manual)!;
    assert.equal(manual.jobId, seeded.manualJobId);
    assert.ok(Math.abs(manual.tick - history.generatedAt) < 60_000, 'placed at its add time, not a nominal tick');
    assert.equal(manual.lagMs, undefined, 'no tick to be late for');
    assert.ok(manual.startLagMs! >= 0 && manual.durationMs! >= 0, JSON.stringify(manual));
  });

  it('folds the lease writes into terms: released, expired, current', () => {
    const { source, terms } = history.leadership;
    assert.equal(source, 'lease-history');
    assert.deepEqual(terms.map((t) => [t.holder, t.leaderTransitions, t.end, t.writes]), [
      ['pod-a', 0, 'released', 4],
      ['pod-b', 1, 'expired', 2],
      ['pod-c', 2, 'current', 2],
    ]);
    assert.equal(terms[1]!.endedAt, terms[1]!.lastRenewedAt + 15_000, 'an expired term ends when its lease ran out');
  });

  it('asks BullMQ again only about runs that may still change', async () => {
    const { ticks } = seeded;
    const connection = redis.server.client();
    try {
      // Retention removes a completed run and a failed one from BullMQ after they were shown.
      await connection.del(`leasebeat-test:ops:heartbeat@${ticks.heartbeat.ran}`, `leasebeat-test:ops:heartbeat@${ticks.heartbeat.failed}`);
    } finally {
      connection.disconnect();
    }
    const heartbeat = (await seeded.reader.read()).jobs.find((job) => job.name === 'heartbeat')!;
    const fate = (tick: number) => heartbeat.ticks.find((t) => t.tick === tick)?.fate;
    assert.equal(fate(ticks.heartbeat.ran), 'ran', 'a completed run is remembered, not read again');
    assert.equal(fate(ticks.heartbeat.failed), 'gone', 'a failed run is read again (it may be retried)');
  });

  it('reads only the lease writes made since the previous read', async () => {
    const again = await seeded.reader.read();
    assert.deepEqual(again.leadership.terms.map((t) => t.writes), [4, 2, 2], 'no write folded twice');
  });
});

describe('HistoryReader without a lease history (Kubernetes lock)', () => {
  it('shows the term that raised the fence last, and says where the rest is', async () => {
    const redis = await startRedis();
    const connection = redis.client();
    try {
      const keys = new KeySpace('leasebeat', 'k8s');
      const reader = new HistoryReader({ redis: connection, keys, jobs: () => [], noHistoryNote: kubernetesHistoryNote('ops', 'leasebeat') });
      assert.deepEqual((await reader.read()).leadership.terms, [], 'no term before any leader produced');
      await new TickLedger(connection, keys).raiseFence({ generation: 'uid-1', leaderTransitions: 4 }, 'pod-k', 1_767_225_600_000);
      const { leadership } = await reader.read();
      assert.equal(leadership.source, 'fence');
      assert.deepEqual(leadership.terms.map((t) => [t.holder, t.generation, t.leaderTransitions, t.acquiredAt, t.end]), [['pod-k', 'uid-1', 4, 1_767_225_600_000, 'current']]);
      assert.match(leadership.note!, /kubectl get events -n ops --field-selector involvedObject\.kind=Lease,involvedObject\.name=leasebeat$/);
    } finally {
      connection.disconnect();
      await redis.close();
    }
  });
});

describe('TermFolder', () => {
  const write = (fields: Partial<LeaseWrite>): LeaseWrite => ({
    at: 0, op: 'update', holder: 'a', generation: 'g', transitions: 0, acquireTime: 0, renewTime: 0, durationMs: 15_000, ...fields,
  });
  it('calls a holder change inside the previous lease a takeover, a new generation a recreation, and a stale open term expired', () => {
    const folder = new TermFolder(10);
    folder.add(write({ op: 'create', renewTime: 1_000 }));
    folder.add(write({ holder: 'b', transitions: 1, acquireTime: 5_000, renewTime: 5_000 }));
    folder.add(write({ op: 'create', holder: 'c', generation: 'h', acquireTime: 9_000, renewTime: 9_000 }));
    assert.deepEqual(folder.snapshot(10_000).map((t) => t.end), ['taken-over', 'recreated', 'current']);
    assert.deepEqual(folder.snapshot(30_000).map((t) => [t.end, t.endedAt]), [['taken-over', 5_000], ['recreated', 9_000], ['expired', 24_000]]);
  });
  it('keeps only the newest terms', () => {
    const folder = new TermFolder(2);
    for (let i = 0; i < 5; i++) folder.add(write({ holder: `h${i}`, transitions: i, acquireTime: i * 100_000, renewTime: i * 100_000 }));
    assert.deepEqual(folder.snapshot(400_001).map((t) => t.holder), ['h3', 'h4']);
  });
});
