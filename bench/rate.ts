/** Runs `count` calls of `call`, `inFlight` at a time; answers calls per second. */
export async function rate(count: number, inFlight: number, call: (index: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await call(next++);
    }),
  );
  return count / ((performance.now() - started) / 1000);
}
