import type { Term } from '../../src/election/record.js';
import { Producer, type ProducerOptions } from '../../src/producing/producer.js';

/** A leadership term as the elector hands it to the producer: the fencing token is (generation, transitions). */
export function term(transitions: number, generation = 'gen-1'): Term {
  return { holderIdentity: `leader-${transitions}`, generation, leaderTransitions: transitions, acquireTime: Date.now() };
}

/** One running term of a producer, as {@link producerTerms} starts it. */
export interface RunningTerm {
  stop: AbortController;
  run: Promise<void>;
}

/**
 * Terms of fresh Producers built from `options()` (read at each start: a suite may make its ledger and
 * queues anew before each test): `lead(transitions)` starts one, `stopAll()` ends every one still running.
 */
export function producerTerms(options: () => ProducerOptions): { lead: (transitions: number) => RunningTerm; stopAll: () => Promise<void> } {
  const running: RunningTerm[] = [];
  return {
    lead: (transitions) => {
      const stop = new AbortController();
      const entry = { stop, run: new Producer(options()).run(term(transitions), stop.signal) };
      running.push(entry);
      return entry;
    },
    stopAll: async () => {
      const stopping = running.splice(0);
      for (const entry of stopping) entry.stop.abort();
      await Promise.all(stopping.map((entry) => entry.run));
    },
  };
}
