/**
 * The return codes of leasebeat's Lua scripts, named once. Each script's header documents its codes;
 * these objects are the TypeScript side of the same table. A code that is not in the table means the
 * script and the code calling it disagree (a deploy running two versions, a bug): that is an error,
 * never read as some other answer. An unknown claim code read as "fenced" would end a term for a
 * reason that is not true.
 */

/** A script answered a code its caller does not know. */
export class ScriptProtocolError extends Error {
  override readonly name = 'ScriptProtocolError';
  constructor(
    readonly script: string,
    readonly code: unknown,
  ) {
    super(`${script}.lua answered ${JSON.stringify(code)}, which this version of leasebeat does not know: the script and its caller disagree`);
  }
}

/** The code as one of `codes`' values; throws `ScriptProtocolError` for any other. */
export function scriptCode<Codes extends Record<string, number>>(script: string, codes: Codes, code: unknown): Codes[keyof Codes] {
  const value = typeof code === 'string' && code !== '' ? Number(code) : code;
  for (const known of Object.values(codes)) if (known === value) return known as Codes[keyof Codes];
  throw new ScriptProtocolError(script, code);
}

/** claimTicks.lua, per tick (the whole batch answers `Fenced` alone). */
export const ClaimCode = { Fenced: -1, Hole: -2, Settled: 0, Claimed: 1, Reclaimed: 2, Skipped: 3, Buffered: 4 } as const;
/** confirmTicks.lua and confirmTrigger.lua, per tick (the whole batch answers `Fenced` alone). */
export const ConfirmCode = { Fenced: -1, NotClaimed: -2, AlreadyEnqueued: 0, Enqueued: 1 } as const;
/** raiseFence.lua. */
export const RaiseCode = { Raised: 1, Refused: -1 } as const;
/** markUnstaging.lua. */
export const MarkCode = { Changed: -2, Fenced: -1, Settled: 0, Marked: 1 } as const;
/** restoreStaged.lua. */
export const RestoreCode = { Fenced: -1, NotHeld: 0, Restored: 1 } as const;
/** settleUnstaging.lua. */
export const SettleCode = { NotTakingBack: 0, Settled: 1 } as const;
/** skipRange.lua. */
export const SkipRangeCode = { Fenced: -1, Invalid: -2, Overlaps: -3, Recorded: 1 } as const;
/** claimTrigger.lua. */
export const TriggerCode = { Fenced: -1, Settled: 0, Claimed: 1, Reclaimed: 2, Refused: 3 } as const;
/** pullStagedRun.lua. */
export const PullCode = { NotPulled: 0, Pulled: 1, Held: 2 } as const;
/** startRuns.lua (a worker's durable take). */
export const StartCode = { NotOurs: -1, Start: 1, FinishedLost: 2, RefusedCompleted: 3 } as const;
/** startStagedRuns.lua: startRuns.lua's codes, and a hand-back when the staged run may not start yet. */
export const StagedStartCode = { ...StartCode, HandBack: 0 } as const;
/** finishRuns.lua. */
export const FinishCode = { LockLost: 0, Recorded: 1 } as const;
/** stillHeld.lua. */
export const HeldCode = { Released: 0, StillHeld: 1 } as const;
/** stagedRunMayStart.lua. */
export const MayStartCode = { HandBack: 0, Start: 1 } as const;
/** markReviewed.lua. */
export const ReviewCode = { Fenced: -1, Marked: 1 } as const;
/** requestRunStop.lua. */
export const StopCode = { Fenced: -1, Requested: 1 } as const;
/** pulse.lua. */
export const PulseCode = { Fenced: -1, Stamped: 1 } as const;
/** stepBackfill.lua. */
export const BackfillCode = { Fenced: -1, PendingLeft: -2, NoSuchBackfill: -3, Ended: -4, Decided: 0, Claimed: 1, Skipped: 3, Paused: 5, Claims: 6 } as const;
