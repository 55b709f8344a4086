import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus, release, totalmem } from 'node:os';

/** The facts a benchmark result depends on, for the report's header. */
export interface MachineFacts {
  node: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  redis: string;
  bullmq: string;
}

export function machineFacts(): MachineFacts {
  const redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
  const bullmq = (JSON.parse(readFileSync(new URL('../node_modules/bullmq/package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return {
    node: process.version,
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    cores: availableParallelism(),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${process.platform} ${release()}`,
    redis,
    bullmq,
  };
}
