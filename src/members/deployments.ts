import type { Redis } from 'ioredis';
import { LuaScript } from '../util/lua.js';

const claimScript = new LuaScript(new URL('./lua/claimDeployment.lua', import.meta.url));

/** Another deployment found on this deployment's BullMQ prefix. */
export interface OtherDeployment {
  /** `<key prefix>/<lease name>`. */
  deployment: string;
  /** The instance of it that wrote last. */
  identity: string;
  /** How long ago (Redis clock). */
  ageMs: number;
}

/** Start-up refused: another deployment uses the same BullMQ prefix, so the two would run each other's jobs. */
export class DeploymentConflictError extends Error {
  override readonly name = 'DeploymentConflictError';
  constructor(
    readonly bullPrefix: string,
    readonly others: OtherDeployment[],
  ) {
    super(
      `BullMQ prefix "${bullPrefix}" is in use by another leasebeat deployment (${describeOthers(others)}): ` +
        'two deployments on one BullMQ prefix share its queues and run each other\'s jobs; give this one its own LEASEBEAT_PREFIX (or LEASEBEAT_BULL_PREFIX)',
    );
  }
}

export function describeOthers(others: OtherDeployment[]): string {
  return others.map((o) => `prefix/lease ${o.deployment}, instance ${o.identity}, ${Math.round(o.ageMs / 1000)} s ago`).join('; ');
}

/**
 * Which leasebeat deployments use a BullMQ prefix. A deployment is a key prefix and a lease name: its
 * election, its ledger and (through the BullMQ prefix) its queues. Two deployments that differ in the
 * first but share the last (a lease renamed, an explicit LEASEBEAT_BULL_PREFIX) would each run the other's
 * jobs, so an instance registers itself at start (refused when an instance of another deployment is
 * present) and at every heartbeat (which reports one that appeared since), and leaves at a clean stop. The
 * registry is a hash in BullMQ's prefix, so every deployment that could collide writes to the same one.
 */
export class DeploymentRegistry {
  private readonly key: string;
  private readonly deployment: string;
  /** This instance's field in the registry. */
  private readonly field: string;

  constructor(
    private readonly redis: Redis,
    private readonly bullPrefix: string,
    keyPrefix: string,
    leaseName: string,
    identity: string,
    /** How long an instance counts as present after its last heartbeat. */
    private readonly presentMs: number,
  ) {
    this.key = `${bullPrefix}:leasebeat-deployments`;
    this.deployment = `${keyPrefix}/${leaseName}`;
    this.field = JSON.stringify([this.deployment, identity]);
  }

  /** Registers this instance unless another deployment is present; throws `DeploymentConflictError` when one is. */
  async claim(): Promise<void> {
    const others = await this.register(false);
    if (others.length > 0) throw new DeploymentConflictError(this.bullPrefix, others);
  }

  /** Registers this instance again (a heartbeat); returns the other deployments' instances present. */
  refresh(): Promise<OtherDeployment[]> {
    return this.register(true);
  }

  /** Unregisters this instance (a clean stop). */
  async leave(): Promise<void> {
    await this.redis.hdel(this.key, this.field);
  }

  private async register(always: boolean): Promise<OtherDeployment[]> {
    const flat = await claimScript.run<Array<string | number>>(this.redis, [this.key], [this.field, this.deployment, this.presentMs, always ? '1' : '0']);
    const others: OtherDeployment[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) others.push({ deployment: String(flat[i]), identity: String(flat[i + 1]), ageMs: Number(flat[i + 2]) });
    return others;
  }
}
