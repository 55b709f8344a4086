/**
 * A child process that campaigns with a real LeaderElector and reports its leadership on stdout, one
 * JSON line per event, stamped with the shared monotonic clock (`process.hrtime`), so that a parent can
 * rebuild a single timeline across processes. Used by the race tests.
 *
 *   node --import tsx test/support/elector-process.ts <json options>
 */
import type { Redis } from 'ioredis';
import { LeaderElector } from '../../src/election/leader-elector.js';
import type { ResourceLock } from '../../src/election/resource-lock.js';

export interface ElectorProcessOptions {
  identity: string;
  lock: 'redis' | 'kubernetes';
  redisUrl?: string;
  apiServer?: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as ElectorProcessOptions;
const emit = (event: string, extra: object = {}): void => {
  process.stdout.write(`${JSON.stringify({ event, identity: options.identity, t: Number(process.hrtime.bigint()), ...extra })}\n`);
};

let lock: ResourceLock;
let redis: Redis | undefined;
// Only the lock in use is imported: the Kubernetes client alone takes a second to load.
if (options.lock === 'redis') {
  const { Redis } = await import('ioredis');
  const { RedisLeaseLock } = await import('../../src/election/redis-lock.js');
  redis = new Redis(options.redisUrl!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  lock = new RedisLeaseLock({ connection: redis, name: 'race', identity: options.identity });
} else {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const { KubernetesLeaseLock } = await import('../../src/election/kubernetes-lock.js');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'fake', server: options.apiServer!, skipTLSVerify: true }],
    users: [{ name: 'fake' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  lock = new KubernetesLeaseLock({ namespace: 'default', name: 'race', identity: options.identity, kubeConfig });
}

const elector = new LeaderElector({
  lock,
  leaseDurationMs: options.leaseDurationMs,
  renewDeadlineMs: options.renewDeadlineMs,
  retryPeriodMs: options.retryPeriodMs,
  releaseOnCancel: true,
  recampaign: true,
  callbacks: {
    onStartedLeading: (signal, term) => {
      emit('started', { transitions: term.leaderTransitions, generation: term.generation });
      // The guarded work (the producer) self-fences at lastRenewTime + RenewDeadline even when a starved
      // event loop notices the loss later; report both so the parent can take the earlier one.
      signal.addEventListener(
        'abort',
        () => emit('stopped', { wall: Date.now(), selfFenceAt: elector.lastRenewTime() + options.renewDeadlineMs }),
        { once: true },
      );
    },
    onStoppedLeading: () => undefined,
  },
});

const stop = new AbortController();
process.on('SIGTERM', () => stop.abort(new Error('SIGTERM')));
emit('ready');
await elector.run(stop.signal);
emit('exit');
redis?.disconnect();
process.exit(0);
