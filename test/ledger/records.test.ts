import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { KeySpace } from '../../src/redis/keys.js';
import {
  claimingTerm,
  formatLedgerRecord,
  formatTriggerRecord,
  LedgerRecordError,
  parseLedgerRecord,
  parseTriggerRecord,
  recordedRun,
  takeBackInProgress,
  UNSTAGE_REASONS,
  type LedgerRecord,
  type TriggerRecord,
} from '../../src/ledger/records.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';
import { useRedis } from '../support/redis-server.js';

const term = { generation: '6f1c2a9e-0b7d-4d1e-9a51-3c2f8e4b7a10', leaderTransitions: 7 };

/** Every kind of tick record, as stored and as parsed. */
const LEDGER: Array<[string, LedgerRecord]> = [
  [`claimed|${term.generation}|7|nightly@1700000000000`, { kind: 'claimed', term, jobId: 'nightly@1700000000000' }],
  [`buffered|${term.generation}|7|nightly@1700000060000`, { kind: 'buffered', term, jobId: 'nightly@1700000060000' }],
  ['enqueued|nightly@1700000000000', { kind: 'enqueued', jobId: 'nightly@1700000000000' }],
  ['skipped|overlap', { kind: 'skipped', reason: 'overlap' }],
  ['skipped|missed-window', { kind: 'skipped', reason: 'missed-window' }],
  ['unstaging|paused|nightly@1700000120000|leasebeat', { kind: 'unstaging', reason: 'paused', jobId: 'nightly@1700000120000', queue: 'leasebeat' }],
  // The queue goes last: it is the one part that may hold a '|'.
  ['unstaging|rescheduled|a@1|reports|eu', { kind: 'unstaging', reason: 'rescheduled', jobId: 'a@1', queue: 'reports|eu' }],
];

/** Every kind of trigger record, as stored and as parsed. */
const TRIGGER: Array<[string, TriggerRecord]> = [
  [`claimed|${term.generation}|7|report@manual-42`, { kind: 'claimed', term, jobId: 'report@manual-42' }],
  ['enqueued|report@manual-42', { kind: 'enqueued', jobId: 'report@manual-42' }],
  ['refused|expired', { kind: 'refused', reason: 'expired' }],
  ['refused|unknown-job', { kind: 'refused', reason: 'unknown-job' }],
];

/** Asserts that `parse(text)` throws a LedgerRecordError of `ledger` naming the record. */
function refuses(parse: (text: string) => unknown, ledger: 'tick' | 'trigger', text: string): void {
  assert.throws(
    () => parse(text),
    (error: unknown) => {
      assert.ok(error instanceof LedgerRecordError, `${JSON.stringify(text)}: ${String(error)}`);
      assert.equal(error.name, 'LedgerRecordError');
      assert.equal(error.ledger, ledger);
      assert.equal(error.record, text);
      assert.ok(error.message.includes(JSON.stringify(text)), `the message names the record: ${error.message}`);
      return true;
    },
    `${JSON.stringify(text)} is refused`,
  );
}

describe('ledger records: parse and format', () => {
  it('every tick record parses to its kind and formats back to the same text', () => {
    for (const [text, record] of LEDGER) {
      assert.deepEqual(parseLedgerRecord(text), record, text);
      assert.equal(formatLedgerRecord(record), text);
      assert.deepEqual(parseLedgerRecord(formatLedgerRecord(record)), record);
    }
    for (const reason of UNSTAGE_REASONS) {
      const record: LedgerRecord = { kind: 'unstaging', reason, jobId: 'j@1', queue: 'q' };
      assert.deepEqual(parseLedgerRecord(formatLedgerRecord(record)), record, reason);
    }
  });

  it('every trigger record parses to its kind and formats back to the same text', () => {
    for (const [text, record] of TRIGGER) {
      assert.deepEqual(parseTriggerRecord(text), record, text);
      assert.equal(formatTriggerRecord(record), text);
      assert.deepEqual(parseTriggerRecord(formatTriggerRecord(record)), record);
    }
  });

  it('a tick record of no known form is a LedgerRecordError naming it, never some kind', () => {
    for (const text of [
      '',
      'enqueued',
      'claimed',
      'pending|j@1',
      'refused|expired', // a trigger's record, not a tick's
      'Enqueued|j@1',
      'enqueued|',
      'claimed|gen|7',
      'claimed|gen|seven|j@1',
      'claimed|gen|7.5|j@1',
      'claimed|gen||j@1',
      'buffered|gen|7|',
      'unstaging|paused|j@1',
      'unstaging|paused||q',
      'unstaging|paused|j@1|',
      'unstaging|tired|j@1|q',
    ]) {
      refuses(parseLedgerRecord, 'tick', text);
    }
  });

  it('a trigger record of no known form is a LedgerRecordError naming it', () => {
    for (const text of ['', 'refused', 'skipped|overlap', `buffered|${term.generation}|7|j@1`, 'unstaging|paused|j@1|q', 'claimed|gen|x|j@1', 'enqueued|']) {
      refuses(parseTriggerRecord, 'trigger', text);
    }
  });

  it('refuses to format a record that would not read back as itself', () => {
    const bad: LedgerRecord[] = [
      { kind: 'claimed', term: { generation: 'a|b', leaderTransitions: 1 }, jobId: 'j@1' },
      { kind: 'buffered', term: { generation: 'g', leaderTransitions: 1.5 }, jobId: 'j@1' },
      { kind: 'enqueued', jobId: '' },
      { kind: 'unstaging', reason: 'paused', jobId: 'j|1', queue: 'q' },
      { kind: 'unstaging', reason: 'paused', jobId: 'j@1', queue: '' },
    ];
    for (const record of bad) assert.throws(() => formatLedgerRecord(record), LedgerRecordError, JSON.stringify(record));
    assert.throws(() => formatTriggerRecord({ kind: 'claimed', term: { generation: 'g', leaderTransitions: Number.NaN }, jobId: 'j@1' }), LedgerRecordError);
  });

  it('claimingTerm, takeBackInProgress and recordedRun read the union', () => {
    const first = (kind: LedgerRecord['kind']): LedgerRecord => LEDGER.find(([, record]) => record.kind === kind)![1];
    const [claimed, buffered, enqueued, skipped, unstaging] = (['claimed', 'buffered', 'enqueued', 'skipped', 'unstaging'] as const).map(first) as [LedgerRecord, LedgerRecord, LedgerRecord, LedgerRecord, LedgerRecord];
    assert.deepEqual(claimingTerm(claimed), term);
    for (const other of [buffered, enqueued, skipped, unstaging]) assert.equal(claimingTerm(other), undefined, other.kind);
    assert.deepEqual(takeBackInProgress(unstaging), { reason: 'paused', jobId: 'nightly@1700000120000', queue: 'leasebeat' });
    for (const other of [claimed, buffered, enqueued, skipped]) assert.equal(takeBackInProgress(other), undefined, other.kind);
    assert.deepEqual(
      LEDGER.map(([, record]) => recordedRun(record)),
      ['nightly@1700000000000', 'nightly@1700000060000', 'nightly@1700000000000', undefined, undefined, 'nightly@1700000120000', 'a@1'],
    );
    assert.deepEqual(
      TRIGGER.map(([, record]) => recordedRun(record)),
      ['report@manual-42', 'report@manual-42', undefined, undefined],
    );
  });
});

describe('ledger records: what the Lua scripts write reads as the union', () => {
  const redis = useRedis({ flush: true });
  let ledger: TickLedger;
  const termA = { generation: 'uid-a', leaderTransitions: 3 };

  beforeEach(async () => {
    ledger = new TickLedger(redis.client, new KeySpace('test', 'records'));
    assert.deepEqual(await ledger.raiseFence(termA, 'a', 1), { ok: true });
  });

  /** The stored record of a tick, parsed; also checks that the formatter writes exactly what Lua did. */
  const stored = async (job: string, tick: number): Promise<LedgerRecord | undefined> => {
    const text = await ledger.tickState(job, tick);
    const record = await ledger.tickRecord(job, tick);
    if (text === undefined) {
      assert.equal(record, undefined);
      return undefined;
    }
    assert.equal(formatLedgerRecord(record!), text, 'the formatter writes what the script wrote');
    return record;
  };

  it('claims, buffers, confirms, skips and take-backs', async () => {
    assert.equal((await ledger.claim(termA, 'j', 1000, 'j@1000')).kind, 'claimed');
    assert.deepEqual(await stored('j', 1000), { kind: 'claimed', term: termA, jobId: 'j@1000' });
    assert.equal((await ledger.claim(termA, 'j', 2000, 'j@2000', { buffer: true, previousTick: 1000 })).kind, 'buffered');
    assert.deepEqual(await stored('j', 2000), { kind: 'buffered', term: termA, jobId: 'j@2000' });
    assert.equal(await ledger.confirm(termA, 'j', 1000, 'j@1000', 1001), 'enqueued');
    assert.deepEqual(await stored('j', 1000), { kind: 'enqueued', jobId: 'j@1000' });
    assert.equal((await ledger.claim(termA, 'j', 3000, 'j@3000', { skip: 'overlap', previousTick: 2000 })).kind, 'skipped');
    assert.deepEqual(await stored('j', 3000), { kind: 'skipped', reason: 'overlap' });

    assert.equal(await ledger.markUnstaging(termA, 'j', 1000, 'j@1000', 'rescheduled', 'leasebeat'), 'marked');
    assert.deepEqual(await stored('j', 1000), { kind: 'unstaging', reason: 'rescheduled', jobId: 'j@1000', queue: 'leasebeat' });
    // What a takeover reads of it: the pending tick with its parsed record.
    const [taken] = await ledger.takeOverStates([{ job: 'j', stagedWithinMs: 10_000 }], 5000);
    assert.deepEqual(
      taken!.pending.map(({ tick, state }) => [tick, state.kind]),
      [
        [1000, 'unstaging'],
        [2000, 'buffered'],
      ],
    );
    assert.deepEqual(takeBackInProgress(taken!.pending[0]!.state), { reason: 'rescheduled', jobId: 'j@1000', queue: 'leasebeat' });
    assert.equal(await ledger.settleUnstaging('j', 1000, 'taken-back'), true);
    assert.deepEqual(await stored('j', 1000), { kind: 'skipped', reason: 'rescheduled' });
    assert.equal(await stored('j', 9000), undefined);
  });

  it('a pending tick whose record is gone is left out of a takeover, and an unknown record is an error', async () => {
    await ledger.claim(termA, 'j', 1000, 'j@1000');
    await redis.client.zadd(ledger.keys.pending('j'), 500, '500');
    const [taken] = await ledger.takeOverStates([{ job: 'j', stagedWithinMs: 0 }], 2000);
    assert.deepEqual(taken!.pending, [{ tick: 1000, state: { kind: 'claimed', term: termA, jobId: 'j@1000' } }]);

    await redis.client.hset(ledger.keys.ledger('j'), '1000', 'launched|j@1000');
    await assert.rejects(ledger.takeOverStates([{ job: 'j', stagedWithinMs: 0 }], 2000), LedgerRecordError);
    await assert.rejects(ledger.tickRecord('j', 1000), (error: unknown) => error instanceof LedgerRecordError && error.record === 'launched|j@1000');
  });

  it('trigger records: claimed, enqueued, refused (by a leader or by an admin giving up)', async () => {
    const request = { job: 'report', id: 'r1', deadline: Date.now() + 60_000 };
    const trigger = async (id: string): Promise<TriggerRecord> => {
      const text = (await redis.client.hget(ledger.keys.manual('report'), id))!;
      const record = parseTriggerRecord(text);
      assert.equal(formatTriggerRecord(record), text, 'the formatter writes what the script wrote');
      return record;
    };
    assert.deepEqual(await ledger.claimTrigger(termA, request, 'report@manual-r1', ''), { kind: 'claimed', retry: false });
    assert.deepEqual(await trigger('r1'), { kind: 'claimed', term: termA, jobId: 'report@manual-r1' });
    assert.equal(await ledger.confirmTrigger(termA, 'report', 'r1', 'report@manual-r1', '{}'), 'enqueued');
    assert.deepEqual(await trigger('r1'), { kind: 'enqueued', jobId: 'report@manual-r1' });
    assert.deepEqual(await ledger.claimTrigger(termA, { ...request, id: 'r2' }, 'report@manual-r2', 'unknown-job'), { kind: 'refused', reason: 'unknown-job' });
    assert.deepEqual(await trigger('r2'), { kind: 'refused', reason: 'unknown-job' });
    assert.equal(await ledger.abandonTrigger({ job: 'report', id: 'r3', deadline: Date.now() - 1 }), true);
    assert.deepEqual(await trigger('r3'), { kind: 'refused', reason: 'expired' });
  });

  it('trigger records are kept up to a cap per job; past it the oldest go, but never one whose request may still be claimed', async () => {
    const kept = new TickLedger(redis.client, ledger.keys, undefined, 3);
    const past = Date.now() - 60_000;
    const recordsOf = async (): Promise<string[]> => Object.keys(await redis.client.hgetall(kept.keys.manual('busy'))).sort();
    // Five requests past their deadline (an admin gave up, or a leader refused them late): the oldest two go.
    for (let i = 1; i <= 4; i++) assert.deepEqual(await kept.claimTrigger(termA, { job: 'busy', id: `old${i}`, deadline: past + i }, `busy@manual-old${i}`, ''), { kind: 'refused', reason: 'expired' });
    assert.equal(await kept.abandonTrigger({ job: 'busy', id: 'old5', deadline: past + 5 }), true);
    assert.deepEqual(await recordsOf(), ['old2', 'old3', 'old4', 'old5'], 'an abandoned request is in the order too; the cap is kept by the next claim');
    // Requests within their deadline are claimed and kept, whatever the cap: a new leader may read them again.
    for (let i = 1; i <= 4; i++) assert.equal((await kept.claimTrigger(termA, { job: 'busy', id: `new${i}`, deadline: Date.now() + 60_000 }, `busy@manual-new${i}`, '')).kind, 'claimed');
    assert.deepEqual(await recordsOf(), ['new1', 'new2', 'new3', 'new4']);
    // A request read again after its record went is refused, never run: its deadline has passed. Over the
    // cap, its new record is the first to go.
    assert.deepEqual(await kept.claimTrigger(termA, { job: 'busy', id: 'old1', deadline: past + 1 }, 'busy@manual-old1', ''), { kind: 'refused', reason: 'expired' });
    assert.deepEqual(await recordsOf(), ['new1', 'new2', 'new3', 'new4']);
    assert.deepEqual((await redis.client.zrange(kept.keys.manualOrder('busy'), 0, -1)).sort(), ['new1', 'new2', 'new3', 'new4'], 'the order holds what the records do');
  });
});
