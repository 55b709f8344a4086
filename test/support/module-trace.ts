import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What a traced process printed, how it ended, and every module URL it resolved through an ES import. */
export interface TracedRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** In resolution order; repeats kept. */
  resolved: string[];
}

const root = new URL('../../', import.meta.url);
const hooks = new URL('./module-trace-hooks.mjs', import.meta.url).href;
/** Registers the tracing hooks; `--import` takes a data: URL, so no second file is needed. */
const registerHooks = `data:text/javascript,import { register } from 'node:module'; register(${JSON.stringify(hooks)});`;

/**
 * Runs `node [--import tsx] --import <tracing hooks> <args>` from the repository root and records which
 * modules it resolved. The hooks see every ES import, static or dynamic, tsx's included; an ES module
 * required from CommonJS is not seen on Node 20, which is fine for packages that are imported.
 * `LEASEBEAT_MODULE_TRACE` names the trace file in the child, which may read it itself to check what it
 * has loaded so far.
 */
export async function runTraced(args: string[], options: { tsx?: boolean; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<TracedRun> {
  const dir = await mkdtemp(join(tmpdir(), 'leasebeat-trace-'));
  const trace = join(dir, 'resolved.txt');
  try {
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
      execFile(
        process.execPath,
        [...(options.tsx === false ? [] : ['--import', import.meta.resolve('tsx')]), '--import', registerHooks, ...args],
        {
          cwd: root.pathname,
          env: { ...process.env, ...options.env, LEASEBEAT_MODULE_TRACE: trace },
          timeout: options.timeoutMs ?? 60_000,
          killSignal: 'SIGKILL',
        },
        (error, stdout, stderr) => done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
      );
    });
    const resolved = (await readFile(trace, 'utf8').catch(() => '')).split('\n').filter(Boolean);
    return { code, stdout, stderr, resolved };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
