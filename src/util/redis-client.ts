import type { Cluster, Redis } from 'ioredis';

/** A standalone, Sentinel or Cluster client: what every layer above holds. */
export type RedisClient = Redis | Cluster;

/** Whether a client is an ioredis Cluster client (by ioredis' own flag). */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}
