import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/redis/keys.js';
import { ScriptProtocolError } from '../../src/ledger/script-codes.js';
import { TickLedger } from '../../src/ledger/tick-ledger.js';

/**
 * A Redis whose every script answers `reply`: what a ledger of another version (or a broken script) would
 * look like to this one. Only EVALSHA is needed: LuaScript runs scripts with it, and the ledger's write
 * path (directWrites) goes through LuaScript.
 */
function answering(reply: unknown): Redis {
  return { evalsha: () => Promise.resolve(reply) } as unknown as Redis;
}

const token = { generation: 'g', leaderTransitions: 1 };

/** Every TickLedger method that runs a script with return codes, called once. */
const CALLS: Array<[script: string, call: (ledger: TickLedger) => Promise<unknown>, wrap: (code: unknown) => unknown]> = [
  ['raiseFence', (l) => l.raiseFence(token, 'a', 1), (code) => [code]],
  ['claimTicks', (l) => l.claim(token, 'j', 1000, 'j@1000'), (code) => [code, '']],
  ['confirmTicks', (l) => l.confirm(token, 'j', 1000, 'j@1000', 1), (code) => [code]],
  ['markUnstaging', (l) => l.markUnstaging(token, 'j', 1000, 'j@1000', 'paused', 'q'), (code) => code],
  ['settleUnstaging', (l) => l.settleUnstaging('j', 1000, 'runs'), (code) => code],
  ['skipRange', (l) => l.skipRange(token, 'j', { from: 1, to: 2, count: 2, reason: 'missed-window' }), (code) => code],
  ['markReviewed', (l) => l.markReviewed(token, ['j']), (code) => code],
  ['pulse', (l) => l.pulse(token), (code) => code],
  ['stagedRunMayStart', (l) => l.stagedRunMayStart(token, 'j', 1, 1000), (code) => code],
  ['claimTrigger', (l) => l.claimTrigger(token, { job: 'j', id: 'r', deadline: 1 }, 'j@manual-r', ''), (code) => [code]],
  ['confirmTrigger', (l) => l.confirmTrigger(token, 'j', 'r', 'j@manual-r', '{}'), (code) => code],
];

describe('TickLedger: script return codes', () => {
  for (const [script, call, wrap] of CALLS) {
    it(`${script}: an unknown code is a ScriptProtocolError, never read as some answer`, async () => {
      for (const code of [99, -99, null, 'fenced']) {
        const ledger = new TickLedger(answering(wrap(code)), new KeySpace('test', 'codes'));
        await assert.rejects(
          call(ledger),
          (error: unknown) => error instanceof ScriptProtocolError && error.script === script && error.code === code,
          `${script} answering ${JSON.stringify(code)}`,
        );
      }
    });
  }

  it('claimTicks: a per-tick `fenced` (only the whole batch may answer it, alone) is an error too', async () => {
    const ledger = new TickLedger(answering([1, '', -1, '']), new KeySpace('test', 'codes'));
    await assert.rejects(
      ledger.claimTicks(token, [
        { job: 'j', tick: 1000, jobId: 'j@1000' },
        { job: 'j', tick: 2000, jobId: 'j@2000' },
      ]),
      ScriptProtocolError,
    );
  });
});
