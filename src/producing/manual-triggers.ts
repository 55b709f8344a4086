import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LEADER_STREAM_MAXLEN, type KeySpace } from '../redis/keys.js';
import type { ScheduledJob } from '../scheduling/define-job.js';
import type { LaneTerm } from './lane-term.js';
import { isCluster, type RedisClient } from '../redis/redis-topology.js';
import { raceAbort } from '../util/abort.js';


/**
 * How long one blocking read of the request stream waits for a request before it is sent again. A
 * request wakes the read at once; idle, the desk costs one command per this interval.
 */
export const TRIGGER_BLOCK_MS = 10_000;
/** After a failed read, the next one waits this long (on a fresh connection). */
const TRIGGER_RETRY_MS = 500;

/** A trigger request as written to the stream. */
export interface TriggerRequest {
  /** The stream entry id (where to read on from). */
  entry: string;
  id: string;
  job: string;
  requestedAt: number;
  deadline: number;
}

/** What became of a request: the run that was added, or why it was refused. */
export type TriggerOutcome = { jobId: string; queue: string; flow: boolean } | { refused: string };

/** The BullMQ job id of a manual run: one per request, so a retried add adds nothing. */
export function manualJobId(job: string, requestId: string): string {
  return `${job}@manual-${requestId}`;
}

const redisNow = async (redis: Redis): Promise<number> => {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
};

/** Writes a trigger request that a leader must take before `windowMs` has passed (by Redis TIME). */
export async function submitTrigger(redis: Redis, keys: KeySpace, job: string, windowMs: number): Promise<TriggerRequest> {
  const requestedAt = await redisNow(redis);
  const request = { id: randomUUID(), job, requestedAt, deadline: requestedAt + windowMs };
  const entry = await redis.xadd(
    keys.triggers,
    'MAXLEN',
    '~',
    LEADER_STREAM_MAXLEN,
    '*',
    'id',
    request.id,
    'job',
    job,
    'requestedAt',
    String(requestedAt),
    'deadline',
    String(request.deadline),
  );
  return { entry: entry ?? '', ...request };
}

/** The outcome of a request, once a leader has decided it; undefined until then. */
export async function triggerOutcome(redis: Redis, keys: KeySpace, id: string): Promise<TriggerOutcome | undefined> {
  const raw = await redis.lindex(keys.triggerResult(id), 0);
  return raw === null ? undefined : (JSON.parse(raw) as TriggerOutcome);
}

/** A stream entry: a trigger request, or a notice that a job was paused at run time, or that a backfill was requested. */
type StreamEntry = { entry: string; request: TriggerRequest } | { entry: string; pausedJob: string } | { entry: string; backfill: string };

function parseEntries(entries: Array<[string, string[]]>): StreamEntry[] {
  return entries.map(([entry, fields]) => {
    // Names sit at even positions: a value equal to a field name (a job called "notice") is not one.
    const field = (name: string): string => {
      for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]!;
      return '';
    };
    if (field('notice') === 'pause') return { entry, pausedJob: field('job') };
    if (field('notice') === 'backfill') return { entry, backfill: field('id') };
    return { entry, request: { entry, id: field('id'), job: field('job'), requestedAt: Number(field('requestedAt')), deadline: Number(field('deadline')) } };
  });
}

/** What the leader's trigger desk needs from its term: a lane's view (the fenced add included). */
export interface DeskTerm extends LaneTerm {
  /** The job's definition, read from the store when it is a runtime schedule with no lane now. */
  resolveJob(name: string): Promise<ScheduledJob | undefined>;
}

/**
 * The leader's side of `leasebeat trigger`: reads the request stream while this instance leads and runs
 * each request once, under the fence, through the same add as a tick. A trigger ignores the job's overlap
 * policy and does not become its previous run (the ledger's job state is not touched). Pause notices on
 * the same stream are passed to `onPaused`, backfill notices to `onBackfill`.
 */
export class TriggerDesk {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly term: DeskTerm,
    private readonly onPaused: (job: string) => void,
    private readonly onBackfill: () => void,
  ) {}

  /**
   * Reads the stream with a blocking XREAD on a connection of its own (duplicated from the leader's, so a
   * blocked read never delays a claim), from its start at takeover: the script settles requests already
   * recorded, finishes those an earlier term claimed, and refuses those past their deadline.
   */
  async run(): Promise<void> {
    let reader = this.reader();
    // A reader waiting to reconnect when it is disconnected never settles the read it holds for resending
    // (ioredis drops the reconnect): the read is raced with the term's end, so the desk ends either way.
    const close = (): void => reader.disconnect();
    this.term.signal.addEventListener('abort', close, { once: true });
    let cursor = '0-0';
    try {
      while (!this.term.signal.aborted) {
        try {
          const reply = await raceAbort(reader.xread('COUNT', 100, 'BLOCK', TRIGGER_BLOCK_MS, 'STREAMS', this.keys.triggers, cursor), this.term.signal);
          this.term.reached();
          for (const entry of parseEntries(reply?.[0]?.[1] ?? [])) {
            if ('pausedJob' in entry) this.onPaused(entry.pausedJob);
            else if ('backfill' in entry) this.onBackfill();
            else if (!(await this.handle(entry.request))) return;
            cursor = entry.entry;
          }
        } catch (error) {
          if (this.term.signal.aborted) return;
          this.term.log.warn({ err: error }, 'reading or running trigger requests failed; retrying');
          reader.disconnect();
          await this.term.timer.nap(TRIGGER_RETRY_MS).done;
          reader = this.reader();
        }
      }
    } finally {
      this.term.signal.removeEventListener('abort', close);
      reader.disconnect();
    }
  }

  /** A new connection like the leader's (a Cluster duplicates with its startup nodes), waiting out reconnects. */
  private reader(): RedisClient {
    const client = this.redis as RedisClient;
    const reader = isCluster(client)
      ? client.duplicate([], { redisOptions: { ...client.options.redisOptions, maxRetriesPerRequest: null } })
      : client.duplicate({ maxRetriesPerRequest: null });
    // Errors reach the read that failed; the event would otherwise be printed as unhandled.
    reader.on('error', () => undefined);
    return reader;
  }

  /** Runs or refuses one request. False when the term is over (fenced or lost). */
  private async handle(request: TriggerRequest): Promise<boolean> {
    if (!(await this.term.waitLeading())) return false;
    const job = await this.term.resolveJob(request.job);
    const jobId = manualJobId(request.job, request.id);
    const refusal = !job ? 'unknown-job' : job.paused ? 'paused' : '';
    const log = { job: request.job, request: request.id };
    for (let added = false; ; added = true) {
      const claimed = await this.term.ledger.claimTrigger(this.term.token, request, jobId, refusal, added);
      this.term.reached();
      if (claimed.kind === 'fenced') {
        this.term.fenced();
        return false;
      }
      if (claimed.kind === 'refused') this.term.log.warn({ ...log, reason: claimed.reason }, 'trigger refused');
      if (claimed.kind !== 'claimed' || !job) return true;
      // The add is unfenced: it waits out a self-fence pause (the claim stands), and gives up only when the
      // term ends, leaving the claim to the next term. Pause notices queue behind it meanwhile.
      for (;;) {
        if (!(await this.term.waitLeading())) return false;
        if (await this.term.enqueue.add(job, request.requestedAt, jobId, { manual: true })) break;
      }
      const outcome: TriggerOutcome = { jobId, queue: job.queue, flow: job.flow !== undefined };
      const confirmed = await this.term.ledger.confirmTrigger(this.term.token, request.job, request.id, jobId, JSON.stringify(outcome));
      this.term.reached();
      if (confirmed === 'fenced') {
        this.term.fenced();
        return false;
      }
      // A failover lost the claim after the add: claim it again (its add is then a no-op), and confirm.
      if (confirmed === 'not-claimed') {
        this.term.log.warn(log, 'the claim of a trigger was lost in a failover after its run was added; claiming it again');
        continue;
      }
      this.term.log.info({ ...log, jobId }, 'trigger enqueued');
      return true;
    }
  }
}
