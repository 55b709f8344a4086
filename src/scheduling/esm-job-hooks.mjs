// Module hooks registered by the job loader (src/scheduling/loader.ts): a URL carrying the
// `leasebeat-esm` query is a `.ts` job file, loaded as an ES module whatever package it sits in.
// Registered after tsx, so these run first and hand tsx the format.
const MARK = 'leasebeat-esm=1';

export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  return result.url.includes(MARK) ? { ...result, format: 'module' } : result;
}

export async function load(url, context, nextLoad) {
  return nextLoad(url, url.includes(MARK) ? { ...context, format: 'module' } : context);
}
