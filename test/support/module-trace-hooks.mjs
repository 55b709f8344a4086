// Module hooks (see test/support/module-trace.ts): appends the URL of every module resolved by an ES
// import to the file named by LEASEBEAT_MODULE_TRACE, synchronously, before the module loads. They run
// on the hooks thread, which shares the process environment.
import { appendFileSync } from 'node:fs';
import process from 'node:process';

export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  const file = process.env.LEASEBEAT_MODULE_TRACE;
  if (file) appendFileSync(file, `${result.url}\n`);
  return result;
}
