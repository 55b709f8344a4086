/**
 * The Dockerfile replayed without a Docker engine (none runs on this machine or CI's): each stage gets a
 * folder standing for its filesystem, and its instructions are carried out in order, so that a COPY of a
 * path the build context lacks, a CMD naming a file the build does not produce, or an image whose layout
 * cannot start fails here instead of at `docker build` / `docker run`.
 *
 * What is real: the build context (this folder filtered by .dockerignore, as `docker build .` sends it),
 * every COPY (from the context or from an earlier stage), WORKDIR, ENV, the shell commands of RUN (`ln -s`,
 * `mkdir`, the build script's copy of the non-TypeScript files), the CMD in exec form with the image's
 * environment against a real Redis, and the HEALTHCHECK command.
 *
 * What stands in, and why:
 * - `npm ci` links packages from this checkout's node_modules instead of downloading them (no registry
 *   round trip in a unit test): every package in the build stage, and in the runtime stage only those
 *   package-lock.json does not mark `dev`, which is what `npm ci --omit=dev` installs. So an import of a dev
 *   dependency by the compiled code or a job fails here as it would in the image.
 * - `tsc -p tsconfig.build.json` is replaced by the same compiler transpiling each file with that config
 *   (the project sets isolatedModules, so each file's output is what tsc emits), into the paths tsc would
 *   use (outDir + the path below rootDir). It takes a second instead of fifteen; type errors are
 *   `npm run typecheck`'s to find, and a file outside rootDir (which fails tsc) is checked for here.
 * - The base image is not pulled: the stages run on this machine's Node, whose major version must be the
 *   one the FROM line names. USER is not applied (the test may run as root); Kubernetes' runAsNonRoot and
 *   read-only root are checked in manifests.test.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import ts from 'typescript';
import { freePort, useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';
import { dockerignorePatterns, execForm, ignored, parseDockerfile, type Stage } from './dockerfile.js';

const repoRoot = resolve(import.meta.dirname, '../..');
const stages = parseDockerfile(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
const patterns = dockerignorePatterns(repoRoot);

/** The build context: every file below the repository that .dockerignore lets through, as POSIX paths. */
function contextFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(repoRoot, dir), { withFileTypes: true })) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (ignored(patterns, path)) continue;
      if (entry.isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk('');
  return files;
}

interface StageState {
  name: string | undefined;
  /** The folder standing for the stage's `/`. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  cmd?: string[];
  healthcheck?: string[];
}

/** `KEY=value KEY2=value2` (ENV's key=value form; values here have no spaces or quotes). */
function parseEnv(text: string): Record<string, string> {
  return Object.fromEntries(text.split(/\s+/).filter(Boolean).map((pair) => {
    const at = pair.indexOf('=');
    assert.ok(at > 0, `ENV in key=value form only: ${pair}`);
    return [pair.slice(0, at), pair.slice(at + 1)];
  }));
}

/** A container path of the stage, resolved against its WORKDIR, as a host path. */
const hostPath = (stage: StageState, path: string): string => join(stage.root, posix.resolve(stage.workdir, path));

/** Copies a file or a directory's contents, keeping symlinks as they are (as COPY does). */
function copyInto(source: string, target: string): void {
  mkdirSync(dirname(target), { recursive: true });
  cpSync(source, target, { recursive: true, verbatimSymlinks: true });
}

function copy(stage: StageState, done: StageState[], context: string[], instruction: string): void {
  const tokens = instruction.split(/\s+/);
  const flags = tokens.filter((t) => t.startsWith('--'));
  const paths = tokens.filter((t) => !t.startsWith('--'));
  const dest = paths.pop() ?? '';
  assert.ok(paths.length > 0, `COPY without a source: ${instruction}`);
  for (const flag of flags) assert.match(flag, /^--(from|chown|chmod)=/, `unknown COPY flag ${flag}`);
  const fromName = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  const intoDirectory = dest.endsWith('/') || paths.length > 1 || dest === '.';
  for (const source of paths) {
    if (fromName !== undefined) {
      const from = done.find((s) => s.name === fromName);
      assert.ok(from, `COPY --from=${fromName}: no earlier stage of that name`);
      const path = join(from.root, source);
      assert.ok(existsSync(path), `COPY --from=${fromName} ${source}: the stage has no such path`);
      const isDirectory = statSync(path).isDirectory();
      copyInto(path, isDirectory || !intoDirectory ? hostPath(stage, dest) : join(hostPath(stage, dest), posix.basename(source)));
      continue;
    }
    const wanted = posix.normalize(source).replace(/\/$/, '');
    const matches = wanted === '.' ? context : context.filter((f) => f === wanted || f.startsWith(`${wanted}/`));
    assert.ok(matches.length > 0, `COPY ${source}: not in the build context (missing, or excluded by .dockerignore)`);
    const isFile = matches.length === 1 && matches[0] === wanted;
    for (const file of matches) {
      const below = isFile ? posix.basename(file) : wanted === '.' ? file : posix.relative(wanted, file);
      const target = isFile && !intoDirectory ? hostPath(stage, dest) : join(hostPath(stage, dest), below);
      copyInto(join(repoRoot, file), target);
    }
  }
}

/** `npm ci`: links the packages `npm ci` would install (see the file comment). */
function npmCi(stage: StageState, command: string): void {
  const cwd = hostPath(stage, '.');
  const lockFile = join(cwd, 'package-lock.json');
  assert.ok(existsSync(lockFile), `${command}: no package-lock.json in ${stage.workdir} yet (COPY it first)`);
  // npm ci runs the package's own `prepare` unless told not to: in a stage that has only package.json and
  // the lock yet, that build has nothing to compile and fails the image.
  const { scripts } = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  if (scripts?.prepare && !/--ignore-scripts\b/.test(command)) {
    assert.ok(existsSync(join(cwd, 'src')), `${command}: runs \`prepare\` (${scripts.prepare}) before the sources are copied; add --ignore-scripts`);
  }
  const omitDev = /--omit=dev\b/.test(command) || stage.env.NODE_ENV === 'production';
  const lock = JSON.parse(readFileSync(lockFile, 'utf8')) as { packages: Record<string, { dev?: boolean; optional?: boolean }> };
  const modules = join(cwd, 'node_modules');
  mkdirSync(modules, { recursive: true });
  for (const [key, entry] of Object.entries(lock.packages)) {
    const name = /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(key)?.[1];
    if (!name || (omitDev && entry.dev)) continue;
    const installed = join(repoRoot, 'node_modules', name);
    // Optional packages for other platforms (esbuild's binaries) are skipped by npm ci too.
    if (entry.optional && !existsSync(installed)) continue;
    assert.ok(existsSync(installed), `${name} is in package-lock.json but not in node_modules: run npm ci`);
    mkdirSync(dirname(join(modules, name)), { recursive: true });
    symlinkSync(installed, join(modules, name), 'dir');
  }
}

/** `tsc -p <config>`: the compiler transpiles each file of the config into the path tsc would emit it to. */
function transpile(cwd: string, configFile: string): string[] {
  const parsed = ts.getParsedCommandLineOfConfigFile(join(cwd, configFile), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')),
  });
  assert.ok(parsed, `cannot read ${configFile}`);
  const { options, fileNames } = parsed;
  assert.ok(options.outDir && options.rootDir, `${configFile} sets no outDir or rootDir`);
  assert.equal(options.isolatedModules, true, 'file-by-file transpilation equals tsc only under isolatedModules');
  const packageType = (JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8')) as { type?: string }).type;
  const emitted: string[] = [];
  for (const file of fileNames.filter((f) => !f.endsWith('.d.ts'))) {
    const below = relative(options.rootDir, file);
    assert.ok(!below.startsWith('..'), `${file} is outside rootDir ${options.rootDir}: tsc refuses it (TS6059)`);
    const out = join(options.outDir, below.replace(/\.(m|c)?ts$/, (_, k: string | undefined) => `.${k ?? ''}js`));
    // transpileModule cannot see package.json's "type", which decides what nodenext emits for a `.ts`
    // file: ES module syntax for "module", CommonJS otherwise (and always for `.mts` / `.cts`).
    const esm = file.endsWith('.mts') || (!file.endsWith('.cts') && packageType === 'module');
    const compilerOptions = { ...options, module: esm ? ts.ModuleKind.ES2022 : ts.ModuleKind.CommonJS, moduleResolution: undefined, sourceMap: false, declaration: false };
    const { outputText } = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions, fileName: file });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, outputText);
    emitted.push(out);
  }
  return emitted;
}

/** `npm run build`: its script, with the tsc step transpiled and the rest run by the shell. */
function npmRunBuild(stage: StageState): void {
  const cwd = hostPath(stage, '.');
  const pkg = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  const [compile = '', ...rest] = (pkg.scripts?.build ?? '').split(' && ');
  const config = /^tsc -p (\S+)$/.exec(compile)?.[1];
  assert.ok(config, `the build script does not start with "tsc -p <config>": ${compile}`);
  transpile(cwd, config);
  for (const command of rest) shell(stage, command);
}

function shell(stage: StageState, command: string): void {
  execFileSync('sh', ['-c', command], { cwd: hostPath(stage, '.'), env: { PATH: process.env.PATH ?? '', ...stage.env }, stdio: ['ignore', 'ignore', 'pipe'] });
}

function run(stage: StageState, line: string): void {
  for (const command of line.split('&&').map((c) => c.trim())) {
    if (/^npm ci\b/.test(command)) npmCi(stage, command);
    else if (command === 'npm run build') npmRunBuild(stage);
    else if (/^npm cache clean\b/.test(command)) continue; // changes no file of the image's
    else shell(stage, command);
  }
}

/** Carries out every stage; returns the final one. */
function replay(root: string): StageState {
  const context = contextFiles();
  const done: StageState[] = [];
  stages.forEach((stage: Stage, index) => {
    const state: StageState = { name: stage.name, root: join(root, `stage-${index}`), workdir: '/', env: {} };
    mkdirSync(state.root, { recursive: true });
    for (const { keyword, args: text } of stage.instructions) {
      if (keyword === 'WORKDIR') {
        state.workdir = posix.resolve(state.workdir, text);
        mkdirSync(hostPath(state, '.'), { recursive: true });
      } else if (keyword === 'ENV') Object.assign(state.env, parseEnv(text));
      else if (keyword === 'COPY') copy(state, done, context, text);
      else if (keyword === 'RUN') run(state, text);
      else if (keyword === 'CMD') state.cmd = execForm(text);
      else if (keyword === 'HEALTHCHECK') state.healthcheck = execForm(/\bCMD\s+(\[.*\])$/.exec(text)?.[1] ?? 'null');
      else assert.ok(['USER', 'EXPOSE', 'ENTRYPOINT', 'LABEL', 'ARG'].includes(keyword), `instruction ${keyword} is not replayed`);
    }
    done.push(state);
  });
  const final = done[done.length - 1];
  assert.ok(final, 'no stage');
  return final;
}

describe('the Dockerfile replayed without Docker: the image it builds starts and serves', () => {
  let root: string;
  let image: StageState;
  const redis = useRedis();

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'leasebeat-image-'));
    image = replay(root);
  });
  after(() => {
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('runs on the Node major version its FROM lines name', () => {
    for (const stage of stages) {
      const major = /^node:(\d+)/.exec(stage.image)?.[1];
      assert.equal(major, process.versions.node.split('.')[0], `${stage.image} vs this machine's Node ${process.version}`);
    }
  });

  it('holds what the CMD and the job files need, and no sources, tests or dev dependencies', () => {
    const app = hostPath(image, '.');
    const entries = readdirSync(app).sort();
    assert.deepEqual(entries, ['bin', 'dist', 'jobs', 'node_modules', 'package-lock.json', 'package.json', 'src']);
    assert.ok(lstatSync(join(app, 'src')).isSymbolicLink(), 'src is the link to dist');
    const cmdFile = image.cmd?.find((arg) => arg.endsWith('.js'));
    assert.ok(cmdFile && existsSync(join(app, cmdFile)), `the CMD's ${cmdFile} was not built`);
    assert.ok(readdirSync(join(app, 'dist'), { recursive: true, encoding: 'utf8' }).some((f) => f.endsWith('.lua')), 'the Lua scripts were copied into dist');
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> };
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.keys(pkg.devDependencies ?? {}).filter((name) => lock.packages[`node_modules/${name}`]?.dev);
    assert.ok(devOnly.includes('eslint'), 'eslint is a dev-only package');
    assert.deepEqual(devOnly.filter((name) => existsSync(join(app, 'node_modules', name))), [], 'dev-only packages in the runtime stage');
    assert.ok(existsSync(join(app, 'node_modules', 'tsx')), 'tsx (for .ts job files) is missing');
  });

  it('its CMD starts leasebeat with the image\'s environment: ready with the baked jobs, healthy, and it stops cleanly on SIGTERM', { timeout: 60_000 }, async () => {
    const port = await freePort();
    assert.ok(image.cmd, 'no CMD');
    const [command, ...argv] = image.cmd;
    assert.equal(command, 'node');
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: root,
      TMPDIR: join(root, 'tmp'),
      ...image.env,
      LEASEBEAT_REDIS_URL: redis.server.url,
      LEASEBEAT_HTTP_PORT: String(port),
      // The image listens on 0.0.0.0, which needs credentials, as in the Kubernetes Deployment.
      LEASEBEAT_BOARD_TOKEN: 'image-test-token',
      LEASEBEAT_LOG_LEVEL: 'info',
    };
    mkdirSync(env.TMPDIR, { recursive: true });
    assert.equal(image.env.LEASEBEAT_HTTP_HOST, '0.0.0.0');
    const child = spawn(process.execPath, argv, { cwd: hostPath(image, '.'), env, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: Array<{ msg?: string; err?: unknown }> = [];
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    createInterface({ input: child.stdout }).on('line', (text) => {
      try {
        lines.push(JSON.parse(text) as { msg?: string });
      } catch {
        lines.push({ msg: text });
      }
    });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    try {
      await until('the image to serve', () => {
        if (child.exitCode !== null) assert.fail(`exited ${child.exitCode}: ${stderr}${JSON.stringify(lines.slice(-5))}`);
        return lines.some((l) => l.msg === 'serving status, probes, metrics and Bull Board') || undefined;
      }, 40_000);
      const jobFiles = readdirSync(hostPath(image, 'jobs')).filter((f) => /\.[cm]?[jt]s$/.test(f) && !f.startsWith('_'));
      const ready = await until('/readyz to answer 200', async () => {
        const answer = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        return answer?.status === 200 ? ((await answer.json()) as { checks: Array<{ name: string; detail?: string }> }) : undefined;
      }, 30_000);
      const jobs = ready.checks.find((c) => c.name === 'jobs')?.detail ?? '';
      assert.match(jobs, /^(\d+) loaded, 0 failed$/, `the baked jobs: ${jobs}`);
      assert.ok(Number(/^\d+/.exec(jobs)?.[0]) >= jobFiles.length, `${jobs} from ${jobFiles.length} job files`);
      // The HEALTHCHECK, as Docker runs it inside the container.
      assert.ok(image.healthcheck, 'no HEALTHCHECK');
      const [hcCommand, ...hcArgs] = image.healthcheck;
      assert.equal(hcCommand, 'node');
      execFileSync(process.execPath, hcArgs, { cwd: hostPath(image, '.'), env, timeout: 10_000 });
      // The status page needs the token the image was given.
      assert.equal((await fetch(`http://127.0.0.1:${port}/`)).status, 401);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `exit code after SIGTERM; ${stderr}`);
      assert.ok(lines.some((l) => l.msg === 'shut down'), 'it shut down gracefully');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
