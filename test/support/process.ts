/**
 * Whether a process exists and has been reaped: signal 0 reaches a zombie too, so a `false` here also
 * means its parent has collected its exit status.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
