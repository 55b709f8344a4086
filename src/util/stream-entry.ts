/**
 * A Redis stream entry as ioredis returns it: its id `<ms>-<seq>` and its fields flat, `[name, value, …]`.
 * Names sit at even positions only, so a value equal to a field name is never read as one.
 */

/** The fields of a stream entry by name. */
export function streamFields(flat: readonly string[]): Map<string, string> {
  const fields = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(flat[i]!, flat[i + 1]!);
  return fields;
}

/** The Redis time (ms) of a stream entry id `<ms>-<seq>`. */
export function entryTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}
