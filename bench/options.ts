/**
 * The bench's options besides `--only`: `--baseline <git rev>` (a commit to measure beside this checkout in
 * issue 30's sections), and their scale, `--instance-sizes 1000,10000` and `--bytes-schedules 1000000`
 * (smaller for a quick check; the rows then say they are reduced and claim no goal).
 */
import { INSTANCE_SIZES } from './instance-precision.js';
import { BYTES_SCHEDULES } from './redis-bytes.js';
import type { Trees } from './trees.js';

export interface BenchArgs {
  baseline: string | undefined;
  instanceSizes: number[];
  bytesSchedules: number;
}

export interface BenchOptions extends Omit<BenchArgs, 'baseline'> {
  trees: Trees;
}

const usage = (message: string): never => {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
};

export function benchArgs(argv: string[]): BenchArgs {
  const value = (flag: string): string | undefined => {
    const index = argv.indexOf(flag);
    if (index < 0) return undefined;
    const given = argv[index + 1];
    return given === undefined || given.startsWith('--') ? usage(`${flag} needs a value`) : given;
  };
  const counts = (flag: string, fallback: number[]): number[] => {
    const given = value(flag);
    if (given === undefined) return fallback;
    const numbers = given.split(',').map(Number);
    return numbers.every((n) => Number.isInteger(n) && n > 0) ? numbers : usage(`${flag} takes positive whole numbers, comma-separated; got ${JSON.stringify(given)}`);
  };
  return {
    baseline: value('--baseline'),
    instanceSizes: counts('--instance-sizes', INSTANCE_SIZES),
    bytesSchedules: counts('--bytes-schedules', [BYTES_SCHEDULES])[0]!,
  };
}
