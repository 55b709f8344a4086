#!/usr/bin/env node
// Runs the CLI from the compiled dist/ whenever it is current: in an installed package or the image, and
// in a checkout after `npm ci` (its `prepare` script builds dist/). tsx's module hooks cost about 30 MiB
// and half a second of start-up, and a leader that starts later enqueues its first due ticks later. A
// checkout whose sources changed since the last build runs them through tsx instead, so an edit is never
// shadowed by an old build. The job loader registers tsx itself once it meets a `.ts` job file.
import { existsSync, readdirSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const checkout = existsSync(new URL('tsconfig.json', root));

/** Whether dist/ was built after every file under src/ last changed (`npm run build` writes dist/.built last). */
function distIsCurrent() {
  const stamp = new URL('dist/.built', root);
  if (!existsSync(stamp)) return false;
  const builtAt = statSync(stamp).mtimeMs;
  const src = new URL('src/', root);
  return readdirSync(src, { recursive: true }).every((file) => statSync(new URL(file, src)).mtimeMs <= builtAt);
}

const fromSources = checkout && !distIsCurrent();
if (fromSources) {
  const { register } = await import('tsx/esm/api');
  register();
  // Tells the job loader (src/scheduling/loader.ts) not to register tsx a second time.
  globalThis[Symbol.for('leasebeat.tsx-registered')] = true;
}
await import(new URL(fromSources ? 'src/cli/main.ts' : 'dist/cli/main.js', root).href);
