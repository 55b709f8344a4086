import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * `hostname_<uuid>`: unique per process incarnation. A restarted process must not be mistaken for its
 * previous self, or it would silently resume the old term without incrementing `leaderTransitions`.
 */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}
