/**
 * A BullMQ worker in its own process, so that processing does not share an event loop with the producer
 * being measured. Prints `ready` once it listens; SIGTERM closes it.
 *
 *   node --import tsx bench/worker-process.ts <redis url> <queue> <concurrency>
 */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url, queue, concurrency] = process.argv.slice(2);
const connection = new Redis(url!, { maxRetriesPerRequest: null });
const worker = new Worker(queue!, () => Promise.resolve(), { connection, concurrency: Number(concurrency) });
worker.on('error', () => undefined);
await worker.waitUntilReady();
console.log('ready');
process.on('SIGTERM', () => {
  void worker.close().then(() => {
    connection.disconnect();
    process.exit(0);
  });
});
