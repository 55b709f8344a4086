/** The leader's request stream ({@link KeySpace.triggers}) keeps about this many entries: far more than can be pending at once. */
export const LEADER_STREAM_MAXLEN = 1000;
/**
 * The deployment's audit stream ({@link KeySpace.audit}) keeps this many entries, the newest: its writes
 * trim the oldest. An entry costs about 130 bytes with its index id (a schedule write), a few hundred at
 * most (a backfill's), so the trail stays within ~30 MiB however many jobs and schedules there are, while
 * holding months of hand-made changes (pauses, triggers, edits) or the last 100,000 writes of a bulk import.
 */
export const AUDIT_STREAM_MAXLEN = 100_000;
/**
 * The audit index ({@link KeySpace.auditIndex}) lists the newest this many entry ids of each name: the most
 * `history` answers for one name.
 */
export const AUDIT_IDS_PER_NAME = 100;
/**
 * Trigger records kept per job (`leasebeat runs` lists them; the status page reads them every 5 s). Past it,
 * the oldest go, but only those whose request's deadline has passed: a request a new leader may still read
 * from the stream is kept from running twice by its record.
 */
export const MANUAL_RECORDS_KEPT = 1_000;

/**
 * Redis keys of one leasebeat cluster. Every key shares the hash tag `{<cluster>}`, so the fence and the
 * tick ledger live in one slot and a single Lua script may touch them together, on Redis Cluster too.
 */
export class KeySpace {
  readonly base: string;

  constructor(
    readonly prefix = 'leasebeat',
    readonly cluster = 'leasebeat',
  ) {
    this.base = `${prefix}:{${cluster}}`;
  }

  /** Hash: the highest term seen (generation, transitions) and counters of rejected attempts. */
  get fence(): string {
    return `${this.base}:fence`;
  }

  /** Set: generations (lease uids) that were superseded by a recreated lease. */
  get retiredGenerations(): string {
    return `${this.base}:fence:retired`;
  }

  /**
   * Hash: job name → how many of its runs in a row failed for good, for the jobs with `pauseOnFailure`
   * (reset by a completed run, and by the pause it causes).
   */
  get failureStreaks(): string {
    return `${this.base}:failure-streaks`;
  }

  /**
   * Stream: what operators did to the jobs and schedules (pause, resume, trigger, backfill, upsert,
   * remove), one entry each with fields `name`, `action`, `by` and `detail` (JSON), its id Redis time;
   * capped at {@link AUDIT_STREAM_MAXLEN} entries (see lua/includes/audit.lua). Earlier builds kept one
   * stream per name, `<base>:audit:<name>`, which nothing reads any more.
   */
  get audit(): string {
    return `${this.base}:audit`;
  }

  /**
   * Hash: job or schedule name → the ids of its newest entries in {@link audit} (at most
   * {@link AUDIT_IDS_PER_NAME}, space-separated, newest first), so that one name's history is read
   * without scanning the stream. A name whose entries were all trimmed has no field.
   */
  get auditIndex(): string {
    return `${this.base}:audit-index`;
  }

  /** Hash: job name → pause note, for pauses set at run time (`leasebeat pause`). */
  get paused(): string {
    return `${this.base}:paused`;
  }

  /**
   * Hash: nominal tick (ms) → its fate: `claimed|<gen>|<transitions>|<jobId>` (to be added now),
   * `buffered|<gen>|<transitions>|<jobId>` (to be added once the previous run finished), `enqueued|<jobId>`
   * or `skipped|<reason>`.
   */
  ledger(job: string): string {
    return `${this.base}:ledger:${job}`;
  }

  /** Sorted set of the ledger's ticks, for pruning by age. */
  ledgerIndex(job: string): string {
    return `${this.base}:ledger-index:${job}`;
  }

  /** Sorted set of ticks claimed or buffered but not yet confirmed as added: what a new leader must finish. */
  pending(job: string): string {
    return `${this.base}:pending:${job}`;
  }

  /** Sorted set of skipped tick ranges (JSON members), scored by their first tick. */
  skips(job: string): string {
    return `${this.base}:skips:${job}`;
  }

  /**
   * Hash: per-job state: last scheduled tick, last job id, counters, and `reviewedBy` (the term that last
   * applied its rules to the runs earlier terms staged: see markReviewed.lua).
   */
  jobState(job: string): string {
    return `${this.base}:job:${job}`;
  }

  /**
   * Stream of what the leader must hear of at once, capped near {@link LEADER_STREAM_MAXLEN} entries:
   * manual trigger requests (`leasebeat trigger`; fields `id` (uuid), `job`, `requestedAt` and `deadline`,
   * Redis TIME in ms), notices of run-time pauses (fields `notice` = `pause`, `job`), after which the
   * leader takes back the job's staged runs, and of backfills (fields `notice` = `backfill`, `id`), which
   * the leader starts at once. The leader reads it while it leads.
   */
  get triggers(): string {
    return `${this.base}:triggers`;
  }

  /**
   * Hash: trigger request id → its fate: `claimed|<gen>|<transitions>|<jobId>` (to be added now),
   * `enqueued|<jobId>` or `refused|<reason>`. A request with a record is never run again.
   */
  manual(job: string): string {
    return `${this.base}:manual:${job}`;
  }

  /**
   * Sorted set: the trigger request ids of {@link manual}, each scored by its request's deadline (ms), after
   * which no leader may claim it: the order in which the records may go (claimTrigger.lua's retention).
   */
  manualOrder(job: string): string {
    return `${this.base}:manual-order:${job}`;
  }

  /** List: the outcome (JSON) of one trigger request, for the admin that waits on it; expires after 1 h. */
  triggerResult(id: string): string {
    return `${this.base}:trigger-result:${id}`;
  }

  /**
   * Hash: one backfill (`leasebeat backfill`): its request (`job`, `from`, `to`, `overlap`, `rate`,
   * `includeSkipped`, `by`, `requestedAt`, `total`) and its progress, kept here so that the next leader
   * resumes it: `state` (queued, running, done, failed), `cursor` (the newest tick it decided), counts by
   * fate and `lastRunId` (see stepBackfill.lua). Kept after it ends: its decided span tells later
   * backfills which ticks it decided, even once the ledger has pruned their records.
   */
  backfill(id: string): string {
    return `${this.base}:backfill:${id}`;
  }

  /** Sorted set: the ids of one job's backfills, scored by request time. */
  backfills(job: string): string {
    return `${this.base}:backfills:${job}`;
  }

  /** Sorted set: ids of the backfills not ended yet, scored by request time: what a leader must run. */
  get backfillQueue(): string {
    return `${this.base}:backfill-queue`;
  }

  /**
   * Sorted set of ticks a backfill claimed and did not confirm as added: kept apart from {@link pending},
   * so that the live lane's takeover never finishes (or skips) them as its own claims; the next leader's
   * backfill executor does.
   */
  backfillPending(job: string): string {
    return `${this.base}:backfill-pending:${job}`;
  }

  /** Hash: runtime schedule id → `<version>|<updatedAt ms>|<updated by>|<spec JSON>` (see upsertSchedule.lua). */
  get schedules(): string {
    return `${this.base}:schedules`;
  }

  /** Sorted set of schedule ids, all scored 0: listed in id order, page by page, from any id on. */
  get scheduleIds(): string {
    return `${this.base}:schedule-ids`;
  }

  /**
   * Sorted set: runtime schedule id → the instant (ms, Redis time) by which a leader must have looked at it
   * again: never later than its next owed tick. The leader keeps lanes only for the schedules due soon
   * and reads this index for the rest (see ScheduleStore.due and parkSchedule.lua).
   */
  get scheduleDue(): string {
    return `${this.base}:schedule-due`;
  }

  /**
   * Hash: runtime schedule id → `<endedAt ms>|<edit|remove>|<record>`: the version its last write replaced
   * or removed, and when. A leader taking the schedule over after that write records the ticks that
   * version owed and no leader recorded (see JobLane.replaced); dropped once a lane has parked past it.
   */
  get schedulePrevious(): string {
    return `${this.base}:schedule-previous`;
  }

  /** Stream of schedule changes (fields `id`, `version`; version 0 for a removal): the feed every instance follows. */
  get scheduleChanges(): string {
    return `${this.base}:schedule-changes`;
  }

  /**
   * String with a TTL: the stop a leader asked of run `jobId` (overlap `cancelOther`, `terminateOther`), as
   * JSON `{ how, byTick }`; read by the worker that starts the run, if it had not started yet.
   */
  runStop(jobId: string): string {
    return `${this.base}:run-stop:${jobId}`;
  }

  /**
   * Pub/sub channel: each stop request (JSON `{ jobId, how, byTick }`) as it is written, for the worker
   * pools of every instance, one of which runs the run.
   */
  get runStops(): string {
    return `${this.base}:run-stops`;
  }

  /** Hash: member identity → its latest heartbeat record (JSON), written by the member itself. */
  get members(): string {
    return `${this.base}:members`;
  }

  /** Hash: member identity → Redis time (ms) of its last heartbeat write. */
  get memberBeats(): string {
    return `${this.members}:beats`;
  }

  /** Hash: member identity → cordon request (JSON), written by `leasebeat cordon`. */
  get cordons(): string {
    return `${this.base}:cordons`;
  }

  /** String with a TTL: the leader's latest judgement of member health (JSON). */
  get memberHealth(): string {
    return `${this.base}:member-health`;
  }
}
