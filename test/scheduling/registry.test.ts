import assert from 'node:assert/strict';
import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { JobRegistry, type RegistryChange } from '../../src/scheduling/loader.js';

const CHANGE_TIMEOUT_MS = 15_000;

/** Resolves with the first `change` event that satisfies `until`; fails after a generous timeout. */
function nextChange(registry: JobRegistry, what: string, until: (change: RegistryChange) => boolean): Promise<RegistryChange> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      registry.off('change', listener);
      reject(new Error(`no change event within ${CHANGE_TIMEOUT_MS} ms: ${what}`));
    }, CHANGE_TIMEOUT_MS);
    const listener = (change: RegistryChange): void => {
      if (!until(change)) return;
      clearTimeout(timer);
      registry.off('change', listener);
      resolve(change);
    };
    registry.on('change', listener);
  });
}

const job = (name: string, every: string): string =>
  `export default { name: ${JSON.stringify(name)}, every: ${JSON.stringify(every)}, handler: () => ${JSON.stringify(every)} };\n`;

const everyMs = (change: RegistryChange, name: string): number | undefined => {
  const trigger = change.jobs.get(name)?.trigger;
  return trigger?.kind === 'every' ? trigger.everyMs : undefined;
};

// Job files in a CommonJS package scope are cached by path rather than by URL: both must reload.
for (const scope of ['module', 'commonjs'] as const) {
  describe(`JobRegistry hot reload (${scope} package scope)`, () => {
    let dir: string;
    let registry: JobRegistry;
    const file = (name: string): string => path.join(dir, name);

    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), `leasebeat-registry-${scope}-`));
      await writeFile(file('package.json'), JSON.stringify({ type: scope }));
      await writeFile(file('alpha.ts'), job('alpha', '1m'));
      registry = new JobRegistry(dir, { debounceMs: 50 });
    });

    afterEach(async () => {
      await registry.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('applies edits, keeps the last good version of a broken file, and follows deletes and additions', async () => {
      const initial = await registry.start();
      assert.deepEqual([...initial.jobs.keys()], ['alpha']);
      assert.deepEqual(initial.errors, []);

      // An edit takes effect without a restart.
      let changed = nextChange(registry, 'edit alpha', (change) => everyMs(change, 'alpha') === 300_000);
      await writeFile(file('alpha.ts'), job('alpha', '5m'));
      let change = await changed;
      assert.deepEqual(change.updated, ['alpha']);
      assert.deepEqual(change.errors, []);

      // A broken edit keeps the last good version running and says why.
      changed = nextChange(registry, 'break alpha', (c) => c.errors.some((e) => e.message.includes('syntax error')));
      await writeFile(file('alpha.ts'), "export default { name: 'alpha', every: '10m'\n");
      change = await changed;
      assert.equal(everyMs(change, 'alpha'), 300_000);
      assert.deepEqual(change.errors, [
        {
          file: file('alpha.ts'),
          message:
            `${file('alpha.ts')}: has a syntax error on line 2: Expected "}" but found end of file ` +
            '(the previous version of job "alpha" keeps running)',
        },
      ]);
      assert.equal(registry.jobs.get('alpha'), change.jobs.get('alpha'));

      // An invalid definition is a broken edit too.
      changed = nextChange(registry, 'invalid alpha', (c) => c.errors.some((e) => e.message.includes('every "soon"')));
      await writeFile(file('alpha.ts'), job('alpha', 'soon'));
      change = await changed;
      assert.equal(everyMs(change, 'alpha'), 300_000);
      assert.equal(change.errors.length, 1);
      assert.match(change.errors[0]!.message, /every "soon": is not a duration.*\(the previous version of job "alpha" keeps running\)$/);

      // Fixing the file clears the error.
      changed = nextChange(registry, 'fix alpha', (c) => c.errors.length === 0);
      await writeFile(file('alpha.ts'), job('alpha', '2m'));
      change = await changed;
      assert.equal(everyMs(change, 'alpha'), 120_000);

      // A new file adds a job.
      changed = nextChange(registry, 'add beta', (c) => c.jobs.has('beta'));
      await writeFile(file('beta.mjs'), job('beta', '30s'));
      change = await changed;
      assert.deepEqual(change.added, ['beta']);
      assert.deepEqual([...change.jobs.keys()].sort(), ['alpha', 'beta']);

      // A deleted file removes its job.
      changed = nextChange(registry, 'delete alpha', (c) => !c.jobs.has('alpha'));
      await unlink(file('alpha.ts'));
      change = await changed;
      assert.deepEqual(change.removed, ['alpha']);
      assert.deepEqual([...change.jobs.keys()], ['beta']);
      assert.deepEqual(change.errors, []);
    });

    it('lets the running owner of a name keep it when another file claims it', async () => {
      await registry.start();
      const changed = nextChange(registry, 'duplicate', (c) => c.errors.some((e) => e.message.includes('already defined')));
      await writeFile(file('aaa-copy.ts'), job('alpha', '1h')); // sorts first, but alpha already runs
      const change = await changed;
      assert.equal(change.jobs.get('alpha')!.file, file('alpha.ts'));
      assert.deepEqual(change.errors.map((error) => error.file), [file('aaa-copy.ts')]);
      assert.match(change.errors[0]!.message, /name "alpha" is already defined in .*alpha\.ts, which keeps running it/);
    });

    it('does nothing for a file saved without changes', async () => {
      await registry.start();
      let events = 0;
      registry.on('change', () => events++);
      await writeFile(file('alpha.ts'), job('alpha', '1m'));
      await registry.reload();
      assert.equal(events, 0);
      assert.deepEqual([...registry.jobs.keys()], ['alpha']);
    });
  });
}

describe('JobRegistry lifecycle', () => {
  it('rejects a folder that does not exist', async () => {
    const registry = new JobRegistry(path.join(tmpdir(), 'leasebeat-no-such-folder'));
    await assert.rejects(registry.start(), { code: 'ENOENT' });
  });
});
