import type { Redis } from 'ioredis';

/**
 * One of the suite's own connections, opened again if ioredis gives it up for good: every command then
 * fails with "Connection is closed" (seen once after about 25 Sentinel failovers; ioredis #1683). The
 * suite's reads must outlive the faults it injects.
 */
export class RenewedClient {
  private current: Redis;

  constructor(private readonly connect: () => Redis) {
    this.current = connect();
  }

  get client(): Redis {
    if (this.current.status === 'end') this.current = this.connect();
    return this.current;
  }

  close(): void {
    this.current.disconnect();
  }
}
