/**
 * The code trees a bench run measures: this checkout, and with `--baseline <rev>` an earlier commit checked
 * out in a temporary git worktree, so that both run in the same run, interleaved, on the same machine load.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runsAJob } from './leasebeat-start.js';

export interface Tree {
  /** How the table names it: a short commit, `+` when the checkout has uncommitted changes. */
  label: string;
  commit: string;
  dir: string;
}

/** Whose figure a row's cell is: this checkout's, the `--baseline` tree's, or BullMQ's. */
export type System = 'leasebeat' | 'baseline' | 'bullmq';

/** The trees of one run; `baseline` only with `--baseline`. */
export interface Trees {
  current: Tree;
  baseline?: Tree;
}

/** A baseline that cannot be measured; its message is the one line the bench prints before it exits 2. */
class BaselineError extends Error {}

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const git = (args: string[], cwd = ROOT): string => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/** This checkout, built as `npm ci` leaves it (its `prepare`), so that its `leasebeat start` is the one users run. */
export function currentTree(progress: (line: string) => void): Tree {
  const commit = git(['rev-parse', 'HEAD']);
  const changed = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  const tree = { label: `${commit.slice(0, 7)}${changed ? '+' : ''}`, commit, dir: ROOT };
  const failure = runPrepare(tree, progress);
  if (failure !== undefined) throw new Error(`bench: this checkout's \`npm run prepare\` failed (${failure}); fix the build first`);
  return tree;
}

/**
 * What `npm ci` runs after installing: the tree's own `prepare` script, if it has one (a commit that builds
 * dist/ there runs it from dist/). Undefined when done, else why it failed.
 */
function runPrepare(tree: Tree, progress: (line: string) => void): string | undefined {
  const { scripts } = JSON.parse(readFileSync(path.join(tree.dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  if (!scripts?.prepare) return undefined;
  progress(`${tree.label}: npm run prepare (${scripts.prepare}), as npm ci would`);
  const build = spawnSync('npm', ['run', 'prepare'], { cwd: tree.dir, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  return build.status === 0 ? undefined : (build.stderr?.trim().split('\n').at(-1) ?? build.error?.message ?? `exit ${build.status}`);
}

/** A baseline checked out and ready to run, until `remove()` (safe to call twice, and from a signal handler). */
export interface BaselineTree {
  tree: Tree;
  remove(): void;
}

/**
 * Checks out `rev` in a temporary worktree and gives it dependencies: this checkout's node_modules when the
 * two package-lock.json files are equal (an install takes minutes), else `npm ci`. Then it must run a job
 * through its own `leasebeat start`, so that a broken baseline stops the bench before anything is measured.
 */
async function prepareBaseline(rev: string, progress: (line: string) => void): Promise<BaselineTree> {
  const fail = (why: string, fix: string): never => {
    throw new BaselineError(`bench: --baseline ${rev}: ${why}; ${fix}`);
  };
  let commit = '';
  try {
    commit = git(['rev-parse', '--verify', '--quiet', `${rev}^{commit}`]);
  } catch {
    fail('not a commit of this repository', 'give a commit, branch or tag (`git log --oneline`, `git tag`), e.g. --baseline 7c89ce3');
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'leasebeat-baseline-'));
  const tree: Tree = { label: commit.slice(0, 7), commit, dir };
  let removed = false;
  const remove = (): void => {
    if (removed) return;
    removed = true;
    spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: ROOT, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
    spawnSync('git', ['worktree', 'prune'], { cwd: ROOT, stdio: 'ignore' });
  };
  try {
    git(['worktree', 'add', '--detach', dir, commit]);
    const lock = (treeDir: string): string | undefined => {
      try {
        return readFileSync(path.join(treeDir, 'package-lock.json'), 'utf8');
      } catch {
        return undefined;
      }
    };
    if (lock(dir) !== undefined && lock(dir) === lock(ROOT)) {
      symlinkSync(realpathSync(path.join(ROOT, 'node_modules')), path.join(dir, 'node_modules'));
      // No install ran, so neither did its prepare.
      const failure = runPrepare(tree, progress);
      if (failure !== undefined) fail(`its \`npm run prepare\` failed (${failure})`, 'pick a rev that builds');
    } else {
      progress(`baseline ${tree.label}: npm ci in ${dir} (its package-lock.json differs from this checkout's)`);
      const install = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
      if (install.status !== 0) {
        const why = install.stderr?.trim().split('\n').at(-1) ?? install.error?.message ?? `exit ${install.status}`;
        fail(`\`npm ci\` in its worktree failed (${why})`, 'fix that commit\'s package-lock.json, or pick another rev');
      }
    }
    progress(`baseline ${tree.label}: checking that its \`leasebeat start\` runs a job`);
    const failure = await runsAJob(tree);
    if (failure !== undefined) fail(`its \`leasebeat start\` ran no job (${failure})`, 'pick a rev whose `leasebeat start` runs, or fix its install');
    return { tree, remove };
  } catch (error) {
    remove();
    if (error instanceof BaselineError) throw error;
    return fail(`could not check it out (${(error as Error).message.split('\n')[0]})`, 'remove stale worktrees with `git worktree prune` and try again');
  }
}

/**
 * The `--baseline` tree, checked before anything is measured: a bad one ends the bench with its one line
 * and exit code 2. Its worktree is removed by `remove()`, and on Ctrl-C or SIGTERM.
 */
export async function openBaseline(rev: string, progress: (line: string) => void): Promise<BaselineTree> {
  try {
    const baseline = await prepareBaseline(rev, progress);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        baseline.remove();
        process.exit(130);
      });
    }
    return baseline;
  } catch (error) {
    if (!(error instanceof BaselineError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
}
