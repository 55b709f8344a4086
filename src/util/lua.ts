import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

type RedisValue = string | number | null | RedisValue[];

/**
 * A Lua script kept in its own file beside the module that uses it, run with EVALSHA so the hot path
 * does not resend the source; a server that has not cached it yet (NOSCRIPT) gets it once through EVAL.
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;

  constructor(url: URL) {
    this.source = readFileSync(url, 'utf8');
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
}
