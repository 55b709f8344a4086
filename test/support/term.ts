import type { Term } from '../../src/election/record.js';

/** A leadership term as the elector hands it to the producer: the fencing token is (generation, transitions). */
export function term(transitions: number, generation = 'gen-1'): Term {
  return { holderIdentity: `leader-${transitions}`, generation, leaderTransitions: transitions, acquireTime: Date.now() };
}
