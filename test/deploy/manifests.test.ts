/**
 * Offline checks of the deployment artifacts: the Kubernetes manifests (against the API schemas and the
 * rules leader election depends on), docker-compose.yml and the Dockerfile. Docker and a cluster are not
 * needed; the files are parsed and their structure asserted.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { parse as parseYaml } from 'yaml';
import { JITTER_FACTOR } from '../../src/election/config.js';
import { parseDuration } from '../../src/scheduling/duration.js';

const repoRoot = resolve(import.meta.dirname, '../..');
const kubeDir = join(repoRoot, 'deploy/kubernetes');
const CONTAINER_PORT = 8080;

function readYaml(path: string): unknown {
  // `merge` enables the `<<: *anchor` keys that docker-compose.yml uses.
  return parseYaml(readFileSync(path, 'utf8'), { merge: true });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `15s`, `500ms`, `1m` → milliseconds, by the parser the settings use. */
function durationMs(text: string | undefined): number {
  const ms = parseDuration(text);
  assert.ok(ms !== undefined, `not a duration: ${text}`);
  return ms;
}

/**
 * The longest a clean shutdown may take: the drain bound, plus the lease release, which is one lock
 * request and so bounded by the elector's request timeout (RenewDeadline / 2).
 */
function shutdownBudgetMs(env: { shutdownTimeout?: string; renewDeadline?: string }): number {
  return durationMs(env.shutdownTimeout) + durationMs(env.renewDeadline) / 2;
}

/** Checks client-go's timing rule: LeaseDuration > RenewDeadline > 1.2 × RetryPeriod. */
function assertElectionTimings(env: { leaseDuration?: string; renewDeadline?: string; retryPeriod?: string }): void {
  const lease = durationMs(env.leaseDuration);
  const renew = durationMs(env.renewDeadline);
  const retry = durationMs(env.retryPeriod);
  assert.ok(lease > renew && renew > JITTER_FACTOR * retry, `unsafe timings ${lease}/${renew}/${retry} ms`);
}

// ---------------------------------------------------------------------------------------------------------
// Kubernetes

type AttributeMap = ReadonlyArray<{ baseName: string; type: string }>;

/** The attribute map of a generated `@kubernetes/client-node` model class such as `V1PodSpec`. */
function attributeMap(typeName: string): AttributeMap | undefined {
  const model = (k8s as Record<string, unknown>)[typeName];
  if (typeof model !== 'function' || !('getAttributeTypeMap' in model)) return undefined;
  return (model as unknown as { getAttributeTypeMap(): AttributeMap }).getAttributeTypeMap();
}

/**
 * Paths of fields the Kubernetes API does not define. The kubernetes-models validators ignore unknown
 * fields, so a typo such as `readinesProbe` would pass them and be silently dropped by the API server;
 * the client-node models list every field of every type, which catches it.
 */
function unknownFields(value: unknown, typeName: string, path = ''): string[] {
  const arrayOf = /^Array<(.+)>$/.exec(typeName)?.[1];
  if (arrayOf) {
    return Array.isArray(value) ? value.flatMap((item, i) => unknownFields(item, arrayOf, `${path}[${i}]`)) : [];
  }
  const mapOf = /^\{ \[key: string\]: (.+); \}$/.exec(typeName)?.[1];
  if (mapOf) {
    return isRecord(value) ? Object.entries(value).flatMap(([k, v]) => unknownFields(v, mapOf, `${path}.${k}`)) : [];
  }
  const attributes = attributeMap(typeName);
  if (!attributes || !isRecord(value)) return [];
  return Object.entries(value).flatMap(([key, field]) => {
    const attribute = attributes.find((a) => a.baseName === key);
    return attribute ? unknownFields(field, attribute.type, `${path}.${key}`) : [`${path}.${key}`];
  });
}

interface ModelClass<M> {
  new (data: never): M;
  readonly apiVersion: string;
  readonly kind: string;
}

/** Parses one manifest into its model after checking apiVersion and kind. */
function readResource<M>(file: string, Model: ModelClass<M>): M {
  const raw = readYaml(join(kubeDir, file));
  assert.ok(isRecord(raw), `${file} is not a YAML mapping`);
  assert.equal(raw.apiVersion, Model.apiVersion, `${file} apiVersion`);
  assert.equal(raw.kind, Model.kind, `${file} kind`);
  return new Model(raw as never);
}

/** Validates one manifest against the API schema and rejects fields the API does not define. */
function assertValidResource<M extends { validate(): void }>(file: string, Model: ModelClass<M>): void {
  const version = Model.apiVersion.split('/').pop() ?? '';
  const typeName = `${version.charAt(0).toUpperCase()}${version.slice(1)}${Model.kind}`;
  assert.ok(attributeMap(typeName), `no client-node model ${typeName}`);
  assert.deepEqual(unknownFields(readYaml(join(kubeDir, file)), typeName), [], `${file} has fields the API does not define`);
  readResource(file, Model).validate();
}

/** True when a selector with only `matchLabels` selects an object carrying `labels`. */
function selects(matchLabels: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  const wanted = Object.entries(matchLabels ?? {});
  return wanted.length > 0 && wanted.every(([key, value]) => labels?.[key] === value);
}

type LabelSelector = NonNullable<Deployment['spec']>['selector'];
type Probe = NonNullable<IContainer['livenessProbe']>;

function labelSelector(selector: LabelSelector | undefined): Record<string, string> | undefined {
  assert.equal(selector?.matchExpressions, undefined, 'selectors use matchLabels only');
  return selector?.matchLabels;
}

function envValue(container: IContainer, name: string): string | undefined {
  return container.env?.find((variable) => variable.name === name)?.value;
}

/** Resolves a probe or Service target port (a number or a port name) to the container port number. */
function containerPortOf(container: IContainer, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

const deployment = readResource('deployment.yaml', Deployment);
const podSpec = deployment.spec?.template.spec;
const podLabels = deployment.spec?.template.metadata?.labels;
const container = podSpec?.containers[0];
assert.ok(podSpec && container, 'deployment.yaml has no pod template with a container');
const leaseName = envValue(container, 'LEASEBEAT_LEASE_NAME') ?? 'leasebeat';
const kubeTimings = {
  leaseDuration: envValue(container, 'LEASEBEAT_LEASE_DURATION') ?? '15s',
  renewDeadline: envValue(container, 'LEASEBEAT_RENEW_DEADLINE') ?? '10s',
  retryPeriod: envValue(container, 'LEASEBEAT_RETRY_PERIOD') ?? '2s',
  shutdownTimeout: envValue(container, 'LEASEBEAT_SHUTDOWN_TIMEOUT') ?? '25s',
};

interface Kustomization {
  apiVersion: string;
  kind: string;
  namespace?: string;
  resources?: string[];
}
const kustomization = readYaml(join(kubeDir, 'kustomization.yaml')) as Kustomization;

describe('Kubernetes manifests', () => {
  it('the unknown-field check catches a misspelt field', () => {
    const typo = { spec: { template: { spec: { containers: [{ name: 'x', readinesProbe: {} }] } } } };
    assert.deepEqual(unknownFields(typo, 'V1Deployment'), ['.spec.template.spec.containers[0].readinesProbe']);
  });

  it('kustomization lists every manifest of the folder except the example Secret', () => {
    assert.equal(kustomization.apiVersion, 'kustomize.config.k8s.io/v1beta1');
    assert.equal(kustomization.kind, 'Kustomization');
    const manifests = readdirSync(kubeDir).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'secret.example.yaml',
    );
    assert.deepEqual([...(kustomization.resources ?? [])].sort(), manifests.sort());
    assert.ok(!kustomization.resources?.includes('secret.example.yaml'));
  });

  const models = {
    'deployment.yaml': Deployment,
    'serviceaccount.yaml': ServiceAccount,
    'role.yaml': Role,
    'rolebinding.yaml': RoleBinding,
    'pdb.yaml': PodDisruptionBudget,
    'service.yaml': Service,
    'secret.example.yaml': Secret,
  } as const;
  for (const [file, Model] of Object.entries(models)) {
    it(`${file} is a valid ${Model.kind} with no unknown fields`, () => {
      assertValidResource(file, Model as ModelClass<{ validate(): void }>);
    });
  }

  it('every manifest of the folder has its schema check', () => {
    const files = readdirSync(kubeDir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    assert.deepEqual(files.sort(), Object.keys(models).sort());
  });

  describe('RBAC', () => {
    const role = readResource('role.yaml', Role);
    const binding = readResource('rolebinding.yaml', RoleBinding);
    const serviceAccount = readResource('serviceaccount.yaml', ServiceAccount);

    it('grants exactly: get/update on the one named Lease, create on Leases, create on Events', () => {
      const rules = (role.rules ?? []).map((rule) => ({
        apiGroups: rule.apiGroups,
        resources: rule.resources,
        resourceNames: rule.resourceNames,
        verbs: [...rule.verbs].sort(),
        nonResourceURLs: rule.nonResourceURLs,
      }));
      assert.deepEqual(rules, [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [leaseName], verbs: ['get', 'list', 'update', 'watch'], nonResourceURLs: undefined },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: undefined, verbs: ['create'], nonResourceURLs: undefined },
        { apiGroups: [''], resources: ['events'], resourceNames: undefined, verbs: ['create'], nonResourceURLs: undefined },
      ]);
    });

    it('uses no wildcard anywhere', () => {
      const everything = (role.rules ?? []).flatMap((rule) => [
        ...(rule.apiGroups ?? []),
        ...(rule.resources ?? []),
        ...(rule.resourceNames ?? []),
        ...rule.verbs,
      ]);
      assert.ok(everything.every((entry) => !entry.includes('*')), `wildcard in ${everything.join(', ')}`);
    });

    it('binds the namespaced Role to the service account the pods run as, in the kustomize namespace', () => {
      assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata?.name });
      assert.equal(podSpec.serviceAccountName, serviceAccount.metadata?.name);
      assert.ok(kustomization.namespace, 'kustomization.yaml sets no namespace');
      // kustomize rewrites only subjects named "default", so this one must be kept in step by hand.
      assert.deepEqual(binding.subjects, [
        { kind: 'ServiceAccount', name: serviceAccount.metadata?.name, namespace: kustomization.namespace },
      ]);
    });
  });

  describe('Deployment', () => {
    it('runs three replicas and rolls without losing one', () => {
      assert.equal(deployment.spec?.replicas, 3);
      assert.equal(deployment.spec?.strategy?.type, 'RollingUpdate');
      assert.deepEqual(deployment.spec?.strategy?.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 });
      assert.ok(selects(labelSelector(deployment.spec?.selector), podLabels), 'selector does not match the pod labels');
    });

    it('takes identity and namespace from the downward API and elects on a Lease', () => {
      const fieldPath = (name: string): string | undefined =>
        container.env?.find((variable) => variable.name === name)?.valueFrom?.fieldRef?.fieldPath;
      assert.equal(fieldPath('POD_NAME'), 'metadata.name');
      assert.equal(fieldPath('POD_NAMESPACE'), 'metadata.namespace');
      assert.equal(envValue(container, 'LEASEBEAT_LOCK'), 'kubernetes');
      // A fixed identity would make restarted pods resume their predecessor's term.
      assert.equal(container.env?.find((variable) => variable.name === 'LEASEBEAT_IDENTITY'), undefined);
      assert.equal(podSpec.automountServiceAccountToken, true);
      assertElectionTimings(kubeTimings);
    });

    it('reads the Redis URL and the board credentials from the Secret that the example shows', () => {
      const secret = readResource('secret.example.yaml', Secret);
      const fromSecret = (name: string) => container.env?.find((variable) => variable.name === name)?.valueFrom?.secretKeyRef;
      const refs = ['LEASEBEAT_REDIS_URL', 'LEASEBEAT_BOARD_USER', 'LEASEBEAT_BOARD_PASSWORD'].map(fromSecret);
      for (const ref of refs) {
        assert.ok(ref, 'missing a secretKeyRef');
        assert.equal(ref.name, secret.metadata?.name);
        assert.ok(ref.key in (secret.stringData ?? {}), `the example Secret has no key ${ref.key}`);
      }
      assert.deepEqual(Object.keys(secret.stringData ?? {}).sort(), refs.map((ref) => ref?.key).sort());
      for (const value of Object.values(secret.stringData ?? {})) {
        assert.match(value, /CHANGE-ME/, 'example Secret values must be obvious placeholders');
      }
    });

    it('probes /livez and /readyz on the container port the server listens on', () => {
      const httpPort = Number(envValue(container, 'LEASEBEAT_HTTP_PORT') ?? CONTAINER_PORT);
      assert.equal(httpPort, CONTAINER_PORT);
      assert.equal(envValue(container, 'LEASEBEAT_HTTP_HOST'), '0.0.0.0', 'the kubelet probes the pod IP');
      assert.ok(container.ports?.some((p) => p.containerPort === httpPort && (p.protocol ?? 'TCP') === 'TCP'));
      const assertProbe = (probe: Probe | undefined, path: string, label: string): void => {
        assert.equal(probe?.httpGet?.path, path, `${label} path`);
        assert.equal(containerPortOf(container, probe?.httpGet?.port), httpPort, `${label} port`);
      };
      assertProbe(container.livenessProbe, '/livez', 'livenessProbe');
      assertProbe(container.readinessProbe, '/readyz', 'readinessProbe');
      if (container.startupProbe) assertProbe(container.startupProbe, '/livez', 'startupProbe');
    });

    it('gives a clean shutdown the time to stop enqueuing, release the Lease and drain', () => {
      const graceSeconds = podSpec.terminationGracePeriodSeconds;
      assert.ok(graceSeconds !== undefined, 'terminationGracePeriodSeconds is the 30 s default');
      assert.ok(
        graceSeconds * 1000 >= shutdownBudgetMs(kubeTimings),
        `grace ${graceSeconds}s < shutdown ${kubeTimings.shutdownTimeout} + release ${durationMs(kubeTimings.renewDeadline) / 2000}s`,
      );
    });

    it('spreads the pods over nodes', () => {
      const spread = podSpec.topologySpreadConstraints?.find((c) => c.topologyKey === 'kubernetes.io/hostname');
      assert.ok(spread, 'no topology spread on kubernetes.io/hostname');
      assert.equal(spread.maxSkew, 1);
      assert.ok(selects(labelSelector(spread.labelSelector), podLabels), 'spread selector does not match the pods');
    });

    it('runs locked down: non-root, read-only root, no capabilities, no escalation, RuntimeDefault seccomp', () => {
      assert.equal(podSpec.securityContext?.runAsNonRoot, true);
      assert.ok((podSpec.securityContext?.runAsUser ?? 0) > 0, 'runAsUser must be a non-zero UID');
      assert.equal(podSpec.securityContext?.seccompProfile?.type, 'RuntimeDefault');
      const security = container.securityContext;
      assert.equal(security?.allowPrivilegeEscalation, false);
      assert.equal(security?.readOnlyRootFilesystem, true);
      assert.deepEqual(security?.capabilities?.drop, ['ALL']);
      assert.equal(security?.capabilities?.add, undefined);
      assert.equal(security?.privileged ?? false, false);
      // tsx caches compiled job files in the temp directory, which the read-only root would refuse.
      const tmp = container.volumeMounts?.find((mount) => mount.mountPath === '/tmp');
      assert.ok(tmp && podSpec.volumes?.some((v) => v.name === tmp.name && v.emptyDir), 'no writable /tmp');
    });

    it('declares resource requests and limits', () => {
      const { requests, limits } = container.resources ?? {};
      assert.ok(requests?.cpu && requests.memory, 'cpu and memory requests');
      assert.ok(limits?.memory, 'memory limit');
    });
  });

  it('the PodDisruptionBudget allows one voluntary disruption of exactly these pods', () => {
    const pdb = readResource('pdb.yaml', PodDisruptionBudget);
    assert.equal(pdb.spec?.maxUnavailable, 1);
    assert.equal(pdb.spec?.minAvailable, undefined);
    assert.ok(selects(labelSelector(pdb.spec?.selector), podLabels), 'PDB selector does not match the pod labels');
    assert.deepEqual(labelSelector(pdb.spec?.selector), labelSelector(deployment.spec?.selector));
  });

  it('the Service exposes the HTTP port of these pods inside the cluster', () => {
    const service = readResource('service.yaml', Service);
    assert.equal(service.spec?.type ?? 'ClusterIP', 'ClusterIP');
    assert.ok(selects(service.spec?.selector, podLabels), 'Service selector does not match the pod labels');
    const [port] = service.spec?.ports ?? [];
    assert.equal(service.spec?.ports?.length, 1);
    assert.equal(port?.port, CONTAINER_PORT);
    assert.equal(containerPortOf(container, port?.targetPort ?? port?.port), CONTAINER_PORT);
  });
});

// ---------------------------------------------------------------------------------------------------------
// docker-compose

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string | string[];
  healthcheck?: { test?: string | string[] };
  environment?: Record<string, string>;
  deploy?: { replicas?: number };
  container_name?: string;
  ports?: unknown[];
  depends_on?: Record<string, { condition?: string }>;
  volumes?: string[];
  stop_grace_period?: string;
}
interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

const compose = readYaml(join(repoRoot, 'docker-compose.yml')) as ComposeFile;

function service(name: string): ComposeService {
  const found = compose.services[name];
  assert.ok(found, `docker-compose.yml has no service ${name}`);
  return found;
}

/** The services that run leasebeat: those built from this repository. */
const leasebeatServices = Object.entries(compose.services).filter(([, s]) => s.build !== undefined);

describe('docker-compose.yml', () => {
  it('runs Redis 7 with AOF, noeviction, a PONG healthcheck and a named volume', () => {
    const redis = service('redis');
    assert.match(redis.image ?? '', /^redis:7(\.|-|$)/);
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    assert.match(command, /--appendonly yes\b/);
    assert.match(command, /--maxmemory-policy noeviction\b/);
    const test = Array.isArray(redis.healthcheck?.test) ? redis.healthcheck.test.join(' ') : (redis.healthcheck?.test ?? '');
    assert.match(test, /redis-cli ping/);
    // redis-cli exits 0 on an error reply such as LOADING, so success must hinge on the PONG itself.
    assert.match(test, /PONG/);
    const dataVolume = redis.volumes?.map((v) => v.split(':')).find(([, target]) => target === '/data')?.[0];
    assert.ok(dataVolume && compose.volumes && dataVolume in compose.volumes, 'Redis data is not on a named volume');
    assert.equal(redis.ports, undefined, 'Redis should not be published on the host');
  });

  it('scales leasebeat to three replicas without a container name or a host port', () => {
    const leasebeat = service('leasebeat');
    assert.equal(leasebeat.deploy?.replicas, 3);
    assert.equal(leasebeat.container_name, undefined);
    assert.equal(leasebeat.ports, undefined);
  });

  it('publishes the board on exactly one host port, from a single-instance service', () => {
    const published = Object.entries(compose.services).filter(([, s]) => s.ports !== undefined);
    assert.deepEqual(published.map(([name]) => name), ['board']);
    const board = service('board');
    assert.equal(board.ports?.length, 1);
    assert.match(String(board.ports?.[0]), /:8080$/);
    assert.equal(board.deploy?.replicas ?? 1, 1);
    assert.equal(board.container_name, undefined);
    assert.deepEqual(board.build, service('leasebeat').build, 'the board runs the same image');
  });

  for (const [name, instance] of leasebeatServices) {
    describe(`service ${name}`, () => {
      const env = instance.environment ?? {};

      it('builds from an existing context and Dockerfile', () => {
        const context = resolve(repoRoot, instance.build?.context ?? '');
        assert.ok(statSync(context).isDirectory(), `build context ${context}`);
        assert.ok(existsSync(join(context, instance.build?.dockerfile ?? 'Dockerfile')), 'Dockerfile');
      });

      it('waits for a healthy Redis and uses the Redis lock', () => {
        assert.deepEqual(instance.depends_on, { redis: { condition: 'service_healthy' } });
        assert.equal(env.LEASEBEAT_LOCK, 'redis');
        const url = new URL(env.LEASEBEAT_REDIS_URL ?? '');
        assert.equal(url.protocol, 'redis:');
        assert.ok(url.hostname in compose.services, `Redis host ${url.hostname} is not a service`);
        // Identity must stay per-process: `<hostname>_<uuid>` by default.
        assert.equal(env.LEASEBEAT_IDENTITY, undefined);
        assertElectionTimings({
          leaseDuration: env.LEASEBEAT_LEASE_DURATION ?? '15s',
          renewDeadline: env.LEASEBEAT_RENEW_DEADLINE ?? '10s',
          retryPeriod: env.LEASEBEAT_RETRY_PERIOD ?? '2s',
        });
      });

      it('requires board credentials from the environment instead of shipping any', () => {
        const required = /^\$\{LEASEBEAT_BOARD_(PASSWORD|TOKEN):\?[^}]*\}$/;
        const secrets = [env.LEASEBEAT_BOARD_PASSWORD, env.LEASEBEAT_BOARD_TOKEN].filter((v) => v !== undefined);
        assert.ok(secrets.length > 0, 'no board password or token');
        for (const value of secrets) assert.match(value, required);
      });

      it('mounts ./jobs read-only where the image looks for jobs', () => {
        assert.ok(instance.volumes?.includes('./jobs:/app/jobs:ro'), 'no read-only ./jobs mount on /app/jobs');
        // Compose creates a missing bind source (git keeps no empty folder); it must not be a file.
        const jobs = join(repoRoot, 'jobs');
        assert.ok(!existsSync(jobs) || statSync(jobs).isDirectory(), './jobs is not a directory');
      });

      it('waits long enough at stop for release and drain', () => {
        const budget = shutdownBudgetMs({
          shutdownTimeout: env.LEASEBEAT_SHUTDOWN_TIMEOUT ?? '25s',
          renewDeadline: env.LEASEBEAT_RENEW_DEADLINE ?? '10s',
        });
        assert.ok(durationMs(instance.stop_grace_period) >= budget, `stop_grace_period < ${budget} ms`);
      });
    });
  }
});

// ---------------------------------------------------------------------------------------------------------
// Dockerfile

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages of instructions, joining `\` continuations and dropping comments. */
function parseDockerfile(text: string): Stage[] {
  const logical = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const stages: Stage[] = [];
  for (const line of logical) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { keyword: keyword.toUpperCase(), args };
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      stages.push({ image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      assert.ok(stages.length > 0, `${keyword} before FROM`);
      stages[stages.length - 1]?.instructions.push(instruction);
    }
  }
  return stages;
}

/** The JSON array of an exec-form instruction; Docker silently runs invalid JSON through a shell instead. */
function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  assert.ok(Array.isArray(parsed) && parsed.every((a): a is string => typeof a === 'string'), `not exec form: ${args}`);
  return parsed;
}

/** True when a `.dockerignore` pattern (without `**` or negation) excludes `path` or one of its parents. */
function ignored(patterns: string[], path: string): boolean {
  const segments = path.replace(/^\.\//, '').split('/');
  return patterns.some((pattern) => {
    const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
    return segments.some((_, i) => regex.test(segments.slice(0, i + 1).join('/')));
  });
}

/** The modules a job file imports at run time (type-only imports are erased by tsx, so they are skipped). */
function runtimeImports(source: string): string[] {
  const statics = [...source.matchAll(/^\s*(?:import|export)\s+(type\s+)?(?:[^;'"]*?\sfrom\s+)?['"]([^'"]+)['"]/gm)]
    .filter((match) => !match[1])
    .map((match) => match[2] ?? '');
  const dynamics = [...source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((match) => match[1] ?? '');
  return [...statics, ...dynamics];
}

/** The package a bare specifier names: `bullmq`, `@scope/pkg` from `@scope/pkg/sub`. */
function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

const stages = parseDockerfile(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
const dockerignore = readFileSync(join(repoRoot, '.dockerignore'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));
const finalStage = stages[stages.length - 1];
assert.ok(finalStage, 'the Dockerfile has no stage');
const args = (stage: Stage, keyword: string): string[] =>
  stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);

describe('Dockerfile', () => {
  it('builds in several stages, all on node:20-slim', () => {
    assert.ok(stages.length >= 2, 'not multi-stage');
    for (const stage of stages) assert.equal(stage.image, 'node:20-slim');
  });

  it('compiles in a build stage', () => {
    const build = stages[0];
    assert.ok(build?.name, 'the build stage has no name to copy from');
    const runs = args(build, 'RUN').join('\n');
    assert.match(runs, /\bnpm ci\b/);
    assert.match(runs, /\bnpm run build\b/);
  });

  it('carries production dependencies and the built output only', () => {
    const runs = args(finalStage, 'RUN').join('\n');
    assert.match(runs, /\bnpm ci\b[^\n]*--omit=dev/);
    assert.doesNotMatch(runs, /npm run build/);
    const copies = args(finalStage, 'COPY');
    const buildName = stages[0]?.name ?? '';
    assert.ok(copies.some((c) => c.startsWith(`--from=${buildName} `) && /\/dist\s/.test(c)), 'dist/ from the build stage');
    for (const wanted of ['package.json', 'package-lock.json', 'bin', 'jobs']) {
      assert.ok(copies.some((c) => c.split(/\s+/).slice(0, -1).some((src) => src.replace(/\/$/, '').endsWith(wanted))), `copies ${wanted}`);
    }
    // The job loader registers tsx for `.ts` job files, with dev dependencies omitted.
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    assert.ok(pkg.dependencies?.tsx, 'tsx must be a production dependency');
  });

  it('runs as a non-root user', () => {
    const users = args(finalStage, 'USER');
    assert.ok(users.length > 0, 'no USER in the final stage');
    const user = users[users.length - 1]?.split(':')[0];
    assert.ok(user !== 'root' && user !== '0', `runs as ${user}`);
  });

  it('sets the production environment, listens on all interfaces and exposes 8080', () => {
    const env = args(finalStage, 'ENV').join(' ');
    assert.match(env, /\bNODE_ENV=production\b/);
    assert.match(env, /\bLEASEBEAT_HTTP_HOST=0\.0\.0\.0\b/);
    assert.deepEqual(args(finalStage, 'EXPOSE'), [String(CONTAINER_PORT)]);
  });

  it('starts node directly in exec form, so SIGTERM reaches it', () => {
    const cmds = args(finalStage, 'CMD');
    assert.equal(cmds.length, 1);
    assert.deepEqual(execForm(cmds[0] ?? ''), ['node', 'dist/cli/main.js', 'start']);
    assert.deepEqual(args(finalStage, 'ENTRYPOINT'), [], 'an ENTRYPOINT would wrap the CMD');
  });

  it('health-checks /livez with node, not curl', () => {
    for (const healthcheck of args(finalStage, 'HEALTHCHECK')) {
      const command = /\bCMD\s+(\[.*\])$/.exec(healthcheck)?.[1];
      assert.ok(command, `HEALTHCHECK is not in exec form: ${healthcheck}`);
      const argv = execForm(command);
      assert.equal(argv[0], 'node');
      assert.match(argv.join(' '), /\/livez/);
    }
  });

  it('gives the job files every module they import', () => {
    // In the image, /app holds dist/ (also linked as src/), jobs/ and production node_modules only.
    assert.ok(args(finalStage, 'RUN').some((run) => /\bln -s dist src\b/.test(run)), 'src/ is not linked to dist/');
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    const jobsDir = join(repoRoot, 'jobs');
    const jobFiles = existsSync(jobsDir)
      ? readdirSync(jobsDir, { recursive: true, encoding: 'utf8' }).filter((f) => /\.(?:[cm]?[jt]s)$/.test(f))
      : [];
    for (const file of jobFiles) {
      for (const specifier of runtimeImports(readFileSync(join(jobsDir, file), 'utf8'))) {
        const where = `${file} imports ${specifier}`;
        if (specifier.startsWith('node:')) continue;
        if (!specifier.startsWith('.')) {
          assert.ok(pkg.dependencies?.[packageName(specifier)], `${where}: not a production dependency`);
          continue;
        }
        const target = posix.relative('/app', posix.resolve('/app/jobs', posix.dirname(file), specifier));
        const [top] = target.split('/');
        assert.ok(top === 'src' || top === 'jobs', `${where}: ${target} is not in the image`);
        const sourceFile = join(repoRoot, target.replace(/\.js$/, '.ts'));
        assert.ok(existsSync(sourceFile) || existsSync(join(repoRoot, target)), `${where}: ${target} does not exist`);
      }
    }
  });

  it('sends the build stage everything it compiles, and no host node_modules or dist', () => {
    for (const path of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'bin', 'jobs']) {
      assert.ok(!ignored(dockerignore, path), `.dockerignore excludes ${path}`);
    }
    for (const path of ['node_modules', 'dist', '.git', '.env']) {
      assert.ok(ignored(dockerignore, path), `.dockerignore lets ${path} into the context`);
    }
    for (const path of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'src', 'bin']) {
      assert.ok(existsSync(join(repoRoot, path)), `${path} is missing from the build context`);
    }
  });
});
