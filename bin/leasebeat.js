#!/usr/bin/env node
// Runs the CLI: in a checkout (it has tsconfig.json) from the TypeScript sources through tsx; in an
// installed package or the image from the compiled dist/, without tsx, whose module hooks cost about
// 30 MiB and 0.3 s. The job loader registers tsx itself once it meets a `.ts` job file.
import { existsSync } from 'node:fs';

const checkout = existsSync(new URL('../tsconfig.json', import.meta.url));
if (checkout) {
  const { register } = await import('tsx/esm/api');
  register();
  // Tells the job loader (src/scheduling/loader.ts) not to register tsx a second time.
  globalThis[Symbol.for('leasebeat.tsx-registered')] = true;
}
await import(new URL(checkout ? '../src/cli/main.ts' : '../dist/cli/main.js', import.meta.url).href);
