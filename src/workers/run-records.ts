import type { Job } from 'bullmq';
import { LuaScript } from '../util/lua.js';
import { Coalescer } from '../util/coalescer.js';
import { DurabilityError, type WritePath } from '../redis/durability.js';
import { FinishCode, HeldCode, scriptCode, StagedStartCode, StartCode } from '../ledger/script-codes.js';
import { parseRunStop, type RunStopRequest } from '../ledger/run-stops.js';
import type { StagedRunCheck } from '../ledger/tick-ledger.js';

const startRunsScript = new LuaScript(new URL('./lua/startRuns.lua', import.meta.url));
const startStagedRunsScript = new LuaScript(new URL('./lua/startStagedRuns.lua', import.meta.url));
const abandonStartScript = new LuaScript(new URL('./lua/abandonStart.lua', import.meta.url));
const finishRunsScript = new LuaScript(new URL('./lua/finishRuns.lua', import.meta.url));
const stillHeldScript = new LuaScript(new URL('./lua/stillHeld.lua', import.meta.url));

/**
 * The worker's half of exactly-once: a run's own record of its starts and its finish, kept in the BullMQ
 * job's hash (so it lives and dies with the job) and written through `writes`, which on a replicated
 * topology confirms each write on the replicas of the server that made it.
 *
 * - **Take.** Before the handler starts, startRun.lua checks on the server that our lock is there (so the
 *   take is, and, written before it, the add) and counts the start. Confirmed on replicas, a failover
 *   cannot hand the same run to a second worker as if it had never been taken.
 * - **Finish.** When the handler returns (or throws), finishRun.lua records the outcome while our lock is
 *   still held, and the run is handed to BullMQ only once that record is confirmed. BullMQ's own record of
 *   the finish can still be lost (the primary dies right after it): the run then sits in `active` with
 *   our expired lock, and stalled-job recovery puts it back. Its next take finds the finish and records it
 *   again instead of running the handler: a finished run never runs twice because of a failover.
 *   On a replicated topology the worker also checks, right after BullMQ recorded the finish, that the
 *   server has it and replicas hold it; when the server lost it, the worker records it again at once,
 *   while the run is still under its lock, instead of leaving it to stalled-job recovery a lock's
 *   duration later (meanwhile the run would count as unfinished: a `skip` job's ticks would be skipped).
 * - **Batched.** The takes (and the finishes) a worker makes in one turn of the event loop go to Redis in
 *   one script per queue, each run still checked on its own: a burst of runs costs a round trip, and on a
 *   replicated topology a WAIT, per batch instead of per run. Each caller gets its own run's answer.
 * - **Operators.** A completed run put back by hand (Bull Board's retry, `job.retry()`) is refused the same
 *   way: its completion is recorded again and the handler does not run. A run that failed for good can be
 *   retried; that start is counted as `operator-retry`.
 * - **At least once stays at least once** where the runner itself is lost: a process that dies (or is
 *   frozen past its lock) mid-run leaves a start with no finish, and BullMQ's recovery runs it again. That
 *   start is counted as `runner-lost`, with who ran it before.
 */
export class RunRecords {
  private readonly takes: ScriptBatches<TakeReply>;
  private readonly stagedTakes: ScriptBatches<TakeReply>;
  private readonly finishes: ScriptBatches<number>;

  constructor(
    private readonly writes: WritePath,
    private readonly identity: string,
    private readonly now: () => number = Date.now,
  ) {
    // A batch is confirmed on replicas when one of its runs wrote: a take that started or found a finish, a finish recorded.
    const taken = (replies: TakeReply[]): string | undefined => {
      const wrote = replies.filter(([code]) => code !== StagedStartCode.NotOurs && code !== StagedStartCode.HandBack).length;
      return wrote > 0 ? `takes of ${wrote} runs` : undefined;
    };
    this.takes = new ScriptBatches(writes, startRunsScript, taken);
    this.stagedTakes = new ScriptBatches(writes, startStagedRunsScript, taken);
    this.finishes = new ScriptBatches(writes, finishRunsScript, (codes) => {
      const recorded = codes.filter((code) => code === FinishCode.Recorded).length;
      return recorded > 0 ? `finishes of ${recorded} runs` : undefined;
    });
  }

  /**
   * Checks and counts a start of `job`'s handler under the lock `token`; see {@link RunStart}. With
   * `staged` (a staged run's check, where its keys are on the run's server), the take is made only if the
   * check lets the run start, in the same script (startStagedRun.lua): `held` when it does not. Throws
   * `DurabilityError` when the replicas did not confirm the take: the handler must not start then (the
   * count is taken back, best effort).
   */
  async start(job: Job, token: string, staged?: StagedRunCheck): Promise<RunStart> {
    const runner = `${this.now()}|${this.identity}`;
    let reply: TakeReply;
    try {
      reply = staged
        ? await this.stagedTakes.call(job.queueQualifiedName, [...runKeys(job), ...staged.keys], [token, runner, ...staged.args])
        : await this.takes.call(job.queueQualifiedName, runKeys(job), [token, runner]);
    } catch (error) {
      if (error instanceof DurabilityError) await this.writes.script(abandonStartScript, runKeys(job), [token, runner]).catch(() => undefined);
      throw error;
    }
    const code = staged ? scriptCode('startStagedRuns', StagedStartCode, reply[0]) : scriptCode('startRuns', StartCode, reply[0]);
    switch (code) {
      case StartCode.NotOurs:
        return { kind: 'not-ours' };
      case StagedStartCode.HandBack:
        return { kind: 'held' };
      case StartCode.Start:
        return {
          kind: 'start',
          start: reply[1] as StartKind,
          ...(reply[2] ? { previousRunner: reply[2] } : {}),
          ...(staged ? { stopAsked: { request: parseRunStop(reply[4]) } } : {}),
        };
      case StartCode.FinishedLost:
        return { kind: 'finished', finish: parseFinish(reply[1]!), refused: false };
      case StartCode.RefusedCompleted:
        return { kind: 'finished', finish: parseFinish(reply[1]!), refused: true };
    }
  }

  /**
   * Records how the handler ended, while `token` still holds the run's lock. True once recorded (and, on
   * a replicated topology, confirmed); false when the lock is not ours any more.
   */
  async finish(job: Job, token: string, finish: FinishToRecord): Promise<boolean> {
    const code = await this.finishes.call(job.queueQualifiedName, runKeys(job), [token, finish.outcome, finish.final ? '1' : '0', finish.value]);
    return scriptCode('finishRuns', FinishCode, code) === FinishCode.Recorded;
  }

  /** Whether finishes must be confirmed on replicas, and BullMQ's own record of them checked (a replicated topology). */
  get replicated(): boolean {
    return this.writes.replicated;
  }

  /**
   * After BullMQ recorded the finish of a run taken under `token`: false once the server has that record
   * and replicas hold it (confirmed like a write), true when the server still holds the run under our lock,
   * so the record was lost (a failover) and BullMQ's finish must be made again while the run is ours.
   */
  async finishLost(job: Job, token: string): Promise<boolean> {
    const [, lock] = runKeys(job);
    // Confirmed either way: the answer "released" is what BullMQ's finish wrote, on the server that says so.
    const reply = await this.writes.script<number>(stillHeldScript, [lock], [token], () => `BullMQ's record of the finish of ${job.id}`);
    return scriptCode('stillHeld', HeldCode, reply) === HeldCode.StillHeld;
  }
}

/** A take's reply: its code, then what startRuns.lua (or startStagedRuns.lua) says with it. */
type TakeReply = [number, string?, string?, number?, string?];

/** One run's part of a batch script: its keys and arguments, in the script's stride. */
interface RunPart {
  keys: string[];
  args: Array<string | number>;
}

/**
 * A script over many runs (startRuns.lua, …), fed the calls of one turn as one batch per queue: a queue's
 * keys share a slot on a Cluster, so one script may touch them all. `decides` names what a batch's WAIT
 * confirms on a replicated topology, or undefined when the batch wrote nothing.
 */
class ScriptBatches<R> {
  /** One per queue this worker takes runs of: a handful, for the process' life. */
  private readonly byQueue = new Map<string, Coalescer<RunPart, R>>();

  constructor(
    private readonly writes: WritePath,
    private readonly script: LuaScript,
    private readonly decides: (replies: R[]) => string | undefined,
  ) {}

  call(queueKey: string, keys: string[], args: Array<string | number>): Promise<R> {
    let batches = this.byQueue.get(queueKey);
    if (!batches) {
      batches = new Coalescer((parts) => this.writes.script<R[]>(this.script, parts.flatMap((part) => part.keys), parts.flatMap((part) => part.args), this.decides));
      this.byQueue.set(queueKey, batches);
    }
    return batches.call({ keys, args });
  }
}

/** Why a handler starts: the first time, a retry by BullMQ or an operator, or again after its runner was lost. */
export type StartKind = 'first' | 'retry' | 'operator-retry' | 'runner-lost' | 'continued';

/** What a take found. */
export type RunStart =
  /**
   * Run the handler. `previousRunner` (`<ms>|<identity>`): the lost runner's start. `stopAsked`: the stop a
   * leader asked of the run, when the take read it (a staged run's).
   */
  | { kind: 'start'; start: StartKind; previousRunner?: string; stopAsked?: { request: RunStopRequest | undefined } }
  /** A staged run's check did not let it start: hand it back; nothing was written. */
  | { kind: 'held' }
  /** The run finished before: record `finish` again instead of running. `refused`: a completed run put back by hand. */
  | { kind: 'finished'; finish: RecordedFinish; refused: boolean }
  /** This server does not hold our take: do not run, write nothing. */
  | { kind: 'not-ours' };

/** How a handler ended, as recorded. */
export interface FinishToRecord {
  /** `moved`: the handler moved its job itself (to delayed, or to wait for its children). */
  outcome: 'completed' | 'failed' | 'moved';
  /** A failure with no retry left (or unrecoverable). */
  final: boolean;
  /** The return value as JSON text ('' for undefined), or the error's message. */
  value: string;
}

/** A finish read back from the job's hash. */
export interface RecordedFinish extends FinishToRecord {
  /** When it finished, BullMQ's attempts made. */
  attemptsMade: number;
}

function parseFinish(raw: string): RecordedFinish {
  const fields = JSON.parse(raw) as { o: RecordedFinish['outcome']; f: boolean; v: string; atm: number };
  return { outcome: fields.o, final: fields.f, value: fields.v, attemptsMade: fields.atm };
}

/** The job's hash and its lock, as BullMQ names them. */
function runKeys(job: Job): [string, string] {
  const hash = `${job.queueQualifiedName}:${job.id}`;
  return [hash, `${hash}:lock`];
}
