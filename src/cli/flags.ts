import { ConfigError } from '../config/cli-support.js';
import type { Duration } from '../index.js';

/** A flag's whole number of at least `min`; anything else is a one-line configuration error naming it. */
export function wholeNumber(flag: string, text: string, min = 0): number {
  const value = Number(text);
  if (!/^\s*-?\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new ConfigError(`${flag} "${text}" must be a whole number${min > 0 ? ` above ${min - 1}` : ''}`);
  }
  return value;
}

/** A duration as a flag spells it: a bare number is milliseconds, as in the settings; text is kept for its own check. */
export function durationOf(text: string): Duration {
  return /^\d+$/.test(text) ? Number(text) : text;
}

/** A flag's JSON value, or one line naming the flag and how to quote it. */
export function jsonOf(flag: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ConfigError(`${flag}: not JSON (${(error as Error).message}): quote it for the shell, like ${flag} '{"tenant": 1}'`);
  }
}
