/**
 * Offline checks of the deployment artifacts: the Kubernetes manifests (against the API schemas and the
 * rules leader election depends on), docker-compose.yml and the Dockerfile. Docker and a cluster are not
 * needed; the files are parsed and their structure asserted.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative, resolve } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { JITTER_FACTOR } from '../../src/election/config.js';
import { args, dockerignorePatterns, execForm, ignored, parseDockerfile } from './dockerfile.js';
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
  components?: string[];
}
const kustomization = readYaml(join(kubeDir, 'kustomization.yaml')) as Kustomization;

/** Optional parts, as kustomize components an overlay enables: they need a CRD or per-cluster selectors. */
const PODMONITOR_FILE = 'components/podmonitor/podmonitor.yaml';
const NETWORK_POLICY_FILE = 'components/network-policy/networkpolicy.yaml';
/** The example overlay: another namespace, an image, both components. */
const exampleOverlay = join(repoRoot, 'deploy/overlays/example');

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
    [NETWORK_POLICY_FILE]: NetworkPolicy,
  } as const;
  for (const [file, Model] of Object.entries(models)) {
    it(`${file} is a valid ${Model.kind} with no unknown fields`, () => {
      assertValidResource(file, Model as ModelClass<{ validate(): void }>);
    });
  }

  it('every manifest of the folder and its components has its schema check', () => {
    const files = readdirSync(kubeDir, { recursive: true, encoding: 'utf8' }).filter(
      (f) => f.endsWith('.yaml') && posix.basename(f) !== 'kustomization.yaml',
    );
    assert.deepEqual(files.sort(), [...Object.keys(models), PODMONITOR_FILE].sort());
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

    it('binds the namespaced Role to the service account the pods run as, in whatever namespace kustomize sets', () => {
      assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata?.name });
      assert.equal(podSpec.serviceAccountName, serviceAccount.metadata?.name);
      assert.ok(kustomization.namespace, 'kustomization.yaml sets no namespace');
      // kustomize rewrites a subject in `default` to the kustomization's namespace, and again to an
      // overlay's; a subject naming the base's namespace would stay there when an overlay moves the rest.
      assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: serviceAccount.metadata?.name, namespace: 'default' }]);
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
// Kubernetes: the optional components (PodMonitor, NetworkPolicy) and builds of the base and overlays

/**
 * The property names the PodMonitor CRD's schema knows, read from the validator that
 * @kubernetes-models/prometheus-operator compiled from it (it checks `data.<name>` for each). Like the
 * kubernetes-models validators it ignores unknown fields, so a misspelt `intervl` would pass it and be
 * dropped by the API server; checking every key against these names catches that.
 */
const podMonitorFieldNames: ReadonlySet<string> = (() => {
  const packageDir = posix.dirname(createRequire(import.meta.url).resolve('@kubernetes-models/prometheus-operator/package.json'));
  const compiled = readFileSync(join(packageDir, '_schemas/MonitoringCoreosComV1PodMonitor.js'), 'utf8');
  return new Set([...compiled.matchAll(/\bdata\.([A-Za-z][A-Za-z0-9]*)/g)].map((m) => m[1] ?? ''));
})();

/** Keys of `value` (recursively, metadata excluded) that the PodMonitor schema does not name. */
function unknownPodMonitorKeys(value: unknown, path = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => unknownPodMonitorKeys(item, `${path}[${i}]`));
  if (!isRecord(value)) return [];
  return Object.entries(value).flatMap(([key, field]) => {
    // Label maps hold arbitrary keys.
    if (key === 'matchLabels' || key === 'labels' || key === 'annotations') return [];
    if (path === '' && key === 'metadata') return unknownFields(field, 'V1ObjectMeta', '.metadata');
    return podMonitorFieldNames.has(key) ? unknownPodMonitorKeys(field, `${path}.${key}`) : [`${path}.${key}`];
  });
}

type NetworkPolicyPeer = NonNullable<NonNullable<NonNullable<NetworkPolicy['spec']>['egress']>[number]['to']>[number];
type NetworkPolicyPort = NonNullable<NonNullable<NonNullable<NetworkPolicy['spec']>['egress']>[number]['ports']>[number];

/** `UDP/53`, `TCP/http`: a rule's ports as text. */
const portsOf = (ports: NetworkPolicyPort[] | undefined): string[] => (ports ?? []).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`).sort();

describe('Kubernetes components: PodMonitor and NetworkPolicy', () => {
  it('each component is a kustomize Component listing exactly its manifests', () => {
    const componentsDir = join(kubeDir, 'components');
    const names = readdirSync(componentsDir);
    assert.deepEqual(names.sort(), ['network-policy', 'podmonitor']);
    for (const name of names) {
      const component = readYaml(join(componentsDir, name, 'kustomization.yaml')) as Kustomization;
      assert.equal(component.apiVersion, 'kustomize.config.k8s.io/v1alpha1');
      assert.equal(component.kind, 'Component');
      const manifests = readdirSync(join(componentsDir, name)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
      assert.deepEqual([...(component.resources ?? [])].sort(), manifests.sort());
    }
    // A base that named a CRD kind would fail `kubectl apply -k` wherever prometheus-operator is missing.
    assert.ok(!(kustomization.resources ?? []).some((r) => r.startsWith('components')), 'the base pulls in a component');
  });

  describe('PodMonitor', () => {
    const raw = readYaml(join(kubeDir, PODMONITOR_FILE));
    const podMonitor = readResource(PODMONITOR_FILE, PodMonitor);

    it('is a valid monitoring.coreos.com/v1 PodMonitor with no field the CRD does not define', () => {
      podMonitor.validate();
      assert.ok(podMonitorFieldNames.has('podMetricsEndpoints') && podMonitorFieldNames.size > 50, 'the CRD field names were not found');
      assert.deepEqual(unknownPodMonitorKeys({ spec: { podMetricsEndpoints: [{ port: 'http', intervl: '1s' }] } }), ['.spec.podMetricsEndpoints[0].intervl']);
      assert.deepEqual(unknownPodMonitorKeys(raw), []);
    });

    it('scrapes /metrics on the http port of every leasebeat pod, within its interval', () => {
      assert.ok(selects(labelSelector(podMonitor.spec.selector), podLabels), 'PodMonitor selector does not match the pod labels');
      assert.equal(podMonitor.spec.namespaceSelector, undefined, 'the pods are in the PodMonitor\'s own namespace');
      const [endpoint, ...others] = podMonitor.spec.podMetricsEndpoints ?? [];
      assert.ok(endpoint && others.length === 0, 'one endpoint');
      assert.equal(containerPortOf(container, endpoint.port), CONTAINER_PORT, 'the endpoint port names the container port');
      assert.equal(endpoint.path, '/metrics');
      assert.equal(endpoint.scheme ?? 'http', 'http');
      assert.equal(endpoint.basicAuth, undefined, '/metrics is open, like the probes');
      assert.ok(durationMs(endpoint.scrapeTimeout) < durationMs(endpoint.interval), 'scrapeTimeout must be below interval');
      // Each queue's counts are bounded at 5 s (DEFAULT_QUEUE_METRICS_TIMEOUT_MS): the scrape must outlast that.
      assert.ok(durationMs(endpoint.scrapeTimeout) > 5_000, 'scrapeTimeout must exceed the 5 s queue-metrics bound');
    });
  });

  describe('NetworkPolicy', () => {
    const policy = readResource(NETWORK_POLICY_FILE, NetworkPolicy);
    const spec = policy.spec;

    it('isolates the leasebeat pods both ways', () => {
      assert.ok(selects(labelSelector(spec?.podSelector), podLabels), 'podSelector does not match the pod labels');
      assert.deepEqual([...(spec?.policyTypes ?? [])].sort(), ['Egress', 'Ingress']);
    });

    it('lets in only Prometheus, and only on the HTTP port', () => {
      const [rule, ...others] = spec?.ingress ?? [];
      assert.ok(rule && others.length === 0, 'one ingress rule');
      assert.deepEqual(portsOf(rule.ports), ['TCP/http']);
      assert.equal(containerPortOf(container, rule.ports?.[0]?.port), CONTAINER_PORT);
      const [peer, ...morePeers] = rule.from ?? [];
      assert.ok(peer && morePeers.length === 0, 'one source');
      assert.equal(peer.ipBlock, undefined);
      assert.equal(peer.podSelector?.matchLabels?.['app.kubernetes.io/name'], 'prometheus');
      assert.ok(peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'], 'the Prometheus namespace is named');
    });

    it('lets out only DNS, Redis and the API server, each on its ports', () => {
      const egress = spec?.egress ?? [];
      // A rule with no `ports` would allow every port to its peers (to everything without `to`).
      for (const rule of egress) assert.ok((rule.ports ?? []).length > 0, `an egress rule without ports: ${JSON.stringify(rule)}`);
      const isDns = (peers: NetworkPolicyPeer[] | undefined): boolean =>
        (peers ?? []).some((p) => p.podSelector?.matchLabels?.['k8s-app'] === 'kube-dns' && p.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'kube-system');
      assert.deepEqual(
        egress.map((rule) => ({ dns: isDns(rule.to), ports: portsOf(rule.ports) })),
        [
          { dns: true, ports: ['TCP/53', 'UDP/53'] },
          { dns: false, ports: ['TCP/26379', 'TCP/6379'] },
          { dns: false, ports: ['TCP/443', 'TCP/6443'] },
        ],
      );
      // The example Secret's Redis URL uses a port the policy lets out.
      const secret = readResource('secret.example.yaml', Secret);
      const redisPort = new URL(secret.stringData?.['redis-url'] ?? '').port || '6379';
      assert.ok(egress[1]?.ports?.some((p) => String(p.port) === redisPort), `Redis port ${redisPort}`);
    });
  });
});

/** Whether a `kubectl` with its built-in kustomize is on PATH (CI's machine has one; a laptop may not). */
const kubectlVersion = (() => {
  try {
    return execFileSync('kubectl', ['version', '--client'], { encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return undefined;
  }
})();

interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** `kubectl kustomize <dir>`: the objects an apply of that kustomization would send. */
function kustomizeBuild(dir: string): RenderedObject[] {
  const output = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 30_000 });
  return parseAllDocuments(output).map((doc) => doc.toJS() as RenderedObject);
}

const renderedModels: Record<string, ModelClass<{ validate(): void }>> = {
  ServiceAccount, Role, RoleBinding, Service, Deployment, PodDisruptionBudget, NetworkPolicy, PodMonitor,
};

/** Checks a build: valid objects, one namespace, and every reference between them resolved after renames. */
function assertCoherentBuild(objects: RenderedObject[], namespace: string): Record<string, RenderedObject> {
  const byKind: Record<string, RenderedObject> = {};
  for (const object of objects) {
    const Model = renderedModels[object.kind];
    assert.ok(Model, `unexpected kind ${object.kind}`);
    assert.equal(object.apiVersion, Model.apiVersion);
    new Model(object as never).validate();
    assert.equal(object.metadata.namespace, namespace, `${object.kind} ${object.metadata.name} namespace`);
    assert.equal(byKind[object.kind], undefined, `two ${object.kind} objects`);
    byKind[object.kind] = object;
  }
  const rendered = {
    deployment: new Deployment(byKind.Deployment),
    role: new Role(byKind.Role),
    binding: new RoleBinding(byKind.RoleBinding as never),
    account: byKind.ServiceAccount,
  };
  const pod = rendered.deployment.spec?.template;
  assert.equal(pod?.spec?.serviceAccountName, rendered.account?.metadata.name, 'the pods run as the ServiceAccount');
  assert.deepEqual(rendered.binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: rendered.role.metadata?.name });
  assert.deepEqual(rendered.binding.subjects, [{ kind: 'ServiceAccount', name: rendered.account?.metadata.name, namespace }]);
  const env = pod?.spec?.containers[0]?.env ?? [];
  const lease = env.find((e) => e.name === 'LEASEBEAT_LEASE_NAME')?.value;
  assert.deepEqual(rendered.role.rules?.[0]?.resourceNames, [lease], 'resourceNames equal LEASEBEAT_LEASE_NAME');
  // The Secret is created out of band, so its references keep its name whatever prefix the overlay adds.
  for (const ref of env.map((e) => e.valueFrom?.secretKeyRef).filter((r) => r !== undefined)) assert.equal(ref.name, 'leasebeat');
  const labels = pod?.metadata?.labels;
  const selectorOf = (kind: string, path: (object: Record<string, unknown>) => unknown): void => {
    const object = byKind[kind];
    if (object) assert.ok(selects((path(object) as { matchLabels?: Record<string, string> } | undefined)?.matchLabels, labels), `${kind} selects the pods`);
  };
  const specOf = (object: Record<string, unknown>): Record<string, unknown> => (object.spec ?? {}) as Record<string, unknown>;
  selectorOf('PodDisruptionBudget', (o) => specOf(o).selector);
  selectorOf('NetworkPolicy', (o) => specOf(o).podSelector);
  selectorOf('PodMonitor', (o) => specOf(o).selector);
  assert.ok(selects(specOf(byKind.Service ?? {}).selector as Record<string, string>, labels), 'the Service selects the pods');
  return byKind;
}

describe('kustomize builds of the base and overlays (kubectl kustomize)', { skip: kubectlVersion ? false : 'kubectl is not on PATH: the kustomize builds are not checked' }, () => {
  it('the base builds into the namespace of kustomization.yaml, without the optional components', () => {
    const byKind = assertCoherentBuild(kustomizeBuild(kubeDir), kustomization.namespace ?? '');
    assert.deepEqual(Object.keys(byKind).sort(), ['Deployment', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
  });

  it('the example overlay moves everything to its namespace, sets the image and adds both components', () => {
    const overlay = readYaml(join(exampleOverlay, 'kustomization.yaml')) as Kustomization & { images?: Array<{ newName?: string; newTag?: string }> };
    assert.ok(overlay.namespace && overlay.namespace !== kustomization.namespace, 'the example moves to another namespace');
    const byKind = assertCoherentBuild(kustomizeBuild(exampleOverlay), overlay.namespace);
    assert.deepEqual(Object.keys(byKind).sort(), ['Deployment', 'NetworkPolicy', 'PodDisruptionBudget', 'PodMonitor', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    const image = new Deployment(byKind.Deployment).spec?.template.spec?.containers[0]?.image;
    assert.equal(image, `${overlay.images?.[0]?.newName}:${overlay.images?.[0]?.newTag}`);
  });

  it('an overlay of an overlay with a name prefix keeps every reference resolved', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasebeat-overlay-'));
    try {
      // kustomize takes only relative paths to other kustomizations.
      writeFileSync(join(dir, 'kustomization.yaml'), [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'namespace: staging-two',
        'namePrefix: staging-',
        'resources:',
        `  - ${relative(dir, exampleOverlay)}`,
      ].join('\n'));
      const byKind = assertCoherentBuild(kustomizeBuild(dir), 'staging-two');
      for (const object of Object.values(byKind)) assert.match(object.metadata.name, /^staging-/, `${object.kind} renamed`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
const dockerignore = dockerignorePatterns(repoRoot);
const finalStage = stages[stages.length - 1];
assert.ok(finalStage, 'the Dockerfile has no stage');

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
