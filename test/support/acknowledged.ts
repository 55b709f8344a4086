import { DurabilityError } from '../../src/redis/durability.js';
import { until } from './until.js';

/**
 * Makes `write` until its replicas acknowledge it in time, as the producer and the elector do: a write
 * refused as unconfirmed (DurabilityError), which a loaded machine's slow replica causes too, is made
 * again; any other error is thrown. Returns the acknowledged write's result.
 */
export async function untilAcknowledged<T>(what: string, write: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  let acknowledged: { result: T } | undefined;
  await until(`${what} to be acknowledged by the replicas`, async () => {
    try {
      acknowledged = { result: await write() };
      return true;
    } catch (error) {
      if (error instanceof DurabilityError) return false;
      throw error;
    }
  }, timeoutMs);
  return acknowledged!.result;
}
