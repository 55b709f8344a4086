/**
 * A whole leasebeat instance (through `createScheduler`, workers off) in its own process over the runtime
 * schedules already stored on its Redis, for the million-schedules rows of section 8. It runs until
 * SIGTERM and prints JSON lines on stdout:
 *
 *   {"started":<epoch ms>}                     the process start (`performance.timeOrigin`)
 *   {"takenOver":<ms>}                         process start → the producer logs "every job taken over"
 *   {"sample":{"at":<epoch ms>,"rssMiB":…,"heapUsedMiB":…,"heapTotalMiB":…,"externalMiB":…,"cpuMs":…}}   its own memory and CPU, every <sample ms>
 *
 * What it produced is read from Redis by the bench (bench/million-schedules.ts), not from this process.
 *
 *   node --import tsx bench/million-leader-process.ts <redis url> <sample ms>
 */
import { rm } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { jobTypeFolder } from './schedules-leader-process.js';

export interface MemorySample {
  /** Epoch ms. */
  at: number;
  rssMiB: number;
  heapUsedMiB: number;
  /** The V8 heap's committed size, and the memory of C++ objects bound to JS ones (Buffers among them). */
  heapTotalMiB: number;
  externalMiB: number;
  /** CPU time (user + system) since the process start, ms. */
  cpuMs: number;
}

export function memorySample(): MemorySample {
  const memory = process.memoryUsage();
  const cpu = process.cpuUsage();
  const mib = (bytes: number): number => bytes / 2 ** 20;
  return { at: Date.now(), rssMiB: mib(memory.rss), heapUsedMiB: mib(memory.heapUsed), heapTotalMiB: mib(memory.heapTotal), externalMiB: mib(memory.external), cpuMs: (cpu.user + cpu.system) / 1000 };
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const [url, sampleMs] = process.argv.slice(2) as [string, string];
  const print = (line: object): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
  print({ started: performance.timeOrigin });
  const dir = await jobTypeFolder();
  let takenOver = false;
  // The log line the producer writes once every job is taken over: the instant it produces for all of them.
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (takenOver || !line.includes('"every job taken over"')) continue;
        takenOver = true;
        print({ takenOver: Math.round(performance.now()) });
      }
      done();
    },
  });
  const { createScheduler } = await import('../src/index.js');
  const scheduler = createScheduler({
    connection: url,
    jobsDir: dir,
    workers: false,
    identity: `bench-million-${process.pid}`,
    logger: pino({ level: 'info' }, logs),
  });
  const sampler = setInterval(() => print({ sample: memorySample() }), Number(sampleMs));
  print({ sample: memorySample() });
  let stopping = false;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    clearInterval(sampler);
    void scheduler
      .stop()
      .catch(() => undefined)
      .finally(() => void rm(dir, { recursive: true, force: true }).finally(() => process.exit(0)));
  });
  await scheduler.start();
}
