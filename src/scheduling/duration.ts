/**
 * A span of time as users write it: a whole number of milliseconds, or a string of one or more
 * `<number><unit>` parts with units `ms`, `s`, `m`, `h`, `d` — e.g. `"30s"`, `"5m"`, `"1h30m"`, `"1.5h"`.
 */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const WHOLE = /^(?:\s*\d+(?:\.\d+)?\s*(?:ms|s|m|h|d))+\s*$/;
const PART = /(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)/g;

/** Milliseconds for a {@link Duration}, or `undefined` when the value is not one. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string' || !WHOLE.test(value)) return undefined;
  let total = 0;
  for (const [, amount, unit] of value.matchAll(PART)) total += Number(amount) * UNIT_MS[unit!]!;
  return Math.round(total);
}

/** The shortest `1h30m`-style spelling of a millisecond count, for messages and logs. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let text = '';
  for (const unit of ['d', 'h', 'm', 's', 'ms']) {
    const size = UNIT_MS[unit]!;
    const amount = Math.floor(rest / size);
    if (amount > 0) text += `${amount}${unit}`;
    rest -= amount * size;
  }
  return text;
}
