import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { loadServiceConfig, SETTINGS } from '../../src/config/settings.js';

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const known = new Set(Object.values(SETTINGS).map((spec) => spec.env));

/** Compose's `${NAME:-default}` / `${NAME:?message}` as the value a default run gets (a placeholder for required ones). */
function composeValue(value: string): string {
  return value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1').replace(/\$\{[A-Z_]+:\?[^}]*\}/g, 'required-secret');
}

/** Checks a set of variables against the schema: each one is a setting, and together they configure a start. */
function check(where: string, env: Record<string, string>, secrets: string[]): void {
  for (const name of Object.keys(env).filter((key) => key.startsWith('LEASEBEAT_'))) assert.ok(known.has(name), `${where}: ${name} is not a setting`);
  const placeholder = (name: string): string => (name === 'LEASEBEAT_REDIS_URL' ? 'rediss://default:secret@redis.example:6380' : 'from-a-secret');
  const withSecrets = { ...env, ...Object.fromEntries(secrets.map((name) => [name, placeholder(name)])) };
  assert.doesNotThrow(() => loadServiceConfig({}, withSecrets), `${where}: the settings do not load`);
}

describe('the deployment manifests use only settings the schema knows, with values it accepts', () => {
  it('deploy/kubernetes/deployment.yaml', () => {
    const deployment = parseAllDocuments(read('deploy/kubernetes/deployment.yaml')).map((doc) => doc.toJS() as Record<string, unknown>)
      .find((doc) => doc.kind === 'Deployment') as { spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } } };
    const env = deployment.spec.template.spec.containers[0]!.env;
    const literal = Object.fromEntries(env.filter((entry) => entry.value !== undefined).map((entry) => [entry.name, entry.value!]));
    const fromSecrets = env.filter((entry) => entry.value === undefined).map((entry) => entry.name);
    check('deployment.yaml', literal, fromSecrets.filter((name) => name.startsWith('LEASEBEAT_')));
  });

  it('docker-compose.yml', () => {
    const compose = parseYaml(read('docker-compose.yml'), { merge: true }) as { 'x-leasebeat': { environment: Record<string, string> } };
    const env = Object.fromEntries(Object.entries(compose['x-leasebeat'].environment).map(([name, value]) => [name, composeValue(String(value))]));
    check('docker-compose.yml', env, []);
  });
});
