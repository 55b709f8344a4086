import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

type RedisValue = string | number | null | RedisValue[];

/** A line `--- @include "<path>"`: the Lua file at that path (relative to the script, `.lua` added) goes in its place. */
const INCLUDE = /^--- @include "([^"]+)"$/gm;

/**
 * A Lua script kept in its own file beside the module that uses it, run with EVALSHA so the hot path
 * does not resend the source; a server that has not cached it yet (NOSCRIPT) gets it once through EVAL.
 * A rule several scripts share lives in one file they include (`--- @include "includes/fence"`), as
 * BullMQ's scripts do.
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;
  private stampedVariant: LuaScript | undefined;

  constructor(url: URL | { source: string }) {
    this.source = url instanceof URL ? readFileSync(url, 'utf8').replace(INCLUDE, (_line, path: string) => readFileSync(new URL(`${path}.lua`, url), 'utf8')) : url.source;
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run<T = RedisValue>(redis: Redis, keys: string[], args: Array<string | number>): Promise<T> {
    try {
      return (await redis.evalsha(this.sha, keys.length, ...keys, ...args)) as T;
    } catch (error) {
      if (!(error instanceof Error) || !error.message.includes('NOSCRIPT')) throw error;
      return (await redis.eval(this.source, keys.length, ...keys, ...args)) as T;
    }
  }

  /**
   * Runs the script and tells which server ran it: the reply, and the run id of that server read in the
   * same atomic step. The script also increments `syncKey` (a counter in the slot of its keys), so that it
   * always writes: a `WAIT` sent after it on the same connection then covers everything the script saw,
   * even when the script itself wrote nothing (see durability.ts).
   */
  async runStamped<T = RedisValue>(redis: Redis, keys: string[], args: Array<string | number>, syncKey: string): Promise<{ reply: T; runId: string }> {
    this.stampedVariant ??= new LuaScript({ source: stampedSource(this.source) });
    const [runId, reply] = await this.stampedVariant.run<[string, T]>(redis, [...keys, syncKey], args);
    return { reply, runId };
  }
}

/**
 * The script wrapped so that it also returns its server's run id (`{ runId, reply }`). The body runs as
 * a function, unchanged: it sees KEYS without the sync key, which the wrapper takes off the end first.
 */
function stampedSource(source: string): string {
  return [
    'local leasebeat_sync = table.remove(KEYS)',
    'local function leasebeat_body()',
    source,
    'end',
    'local leasebeat_reply = leasebeat_body()',
    "redis.call('INCR', leasebeat_sync)",
    "return { string.match(redis.call('INFO', 'server'), 'run_id:(%w+)'), leasebeat_reply }",
  ].join('\n');
}

/** The run id of the server a connection talks to, read in one script (no key: send it to a node, not a cluster). */
export const serverRunIdScript = new LuaScript({ source: "return string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')" });
