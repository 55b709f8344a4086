/**
 * The Role in deploy/kubernetes/role.yaml against what leasebeat really sends, and against what the docs say.
 *
 * 1. Two real electors on the real `KubernetesLeaseLock` (create, lead, renew, follow, release, take over,
 *    release again, Events) talk to the fake Lease API through a recording proxy. Each request is turned into
 *    the attributes kube-apiserver authorizes (verb, API group, resource, name: its RequestInfo rules, a
 *    `metadata.name=` field selector naming a list or watch), and matched against the Role's rules as the RBAC
 *    authorizer matches them. Every request must be allowed, and every granted verb must be used: the Role is
 *    exactly what the code needs. The fake API does not authorize anything itself; this test does it.
 * 2. docs/elector.md (the Kubernetes lock) and docs/deployment.md (the RBAC table) name the same rules and
 *    verbs as role.yaml.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { KubernetesLeaseLock } from '../../src/election/kubernetes-lock.js';
import { LeaderElector } from '../../src/election/leader-elector.js';
import { FakeLeaseServer } from '../support/fake-lease-server.js';
import { until } from '../support/until.js';

const repoRoot = resolve(import.meta.dirname, '../..');
const kubeDir = join(repoRoot, 'deploy/kubernetes');

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
const role = parseYaml(readFileSync(join(kubeDir, 'role.yaml'), 'utf8')) as { rules?: PolicyRule[] };
const rules = role.rules ?? [];

interface DeploymentEnv {
  spec: { template: { spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } } };
}
const deployment = parseYaml(readFileSync(join(kubeDir, 'deployment.yaml'), 'utf8')) as DeploymentEnv;
const leaseName = deployment.spec.template.spec.containers[0]?.env?.find((e) => e.name === 'LEASEBEAT_LEASE_NAME')?.value ?? 'leasebeat';

/** What kube-apiserver's authorizer is asked about one request. */
interface Attributes {
  verb: string;
  apiGroup: string;
  resource: string;
  namespace: string;
  name: string;
  /** The request, for messages. */
  request: string;
}

/**
 * kube-apiserver's RequestInfo for a resource request: `/api/v1/…` is the core group, `/apis/<group>/<version>/…`
 * any other; GET of an item is `get`, of a collection `list`, or `watch` with `watch=true`; POST `create`, PUT
 * `update`, PATCH `patch`, DELETE `delete` (`deletecollection` on a collection). A list or watch whose field
 * selector is `metadata.name=<name>` is authorized as a request for that name, which is what lets a
 * `resourceNames` rule allow it.
 */
function attributesOf(method: string, url: string): Attributes {
  const parsed = new URL(url, 'http://apiserver');
  const parts = parsed.pathname.split('/').filter(Boolean);
  let rest: string[];
  let apiGroup: string;
  if (parts[0] === 'api') {
    apiGroup = '';
    rest = parts.slice(2);
  } else {
    assert.equal(parts[0], 'apis', `not a resource request: ${method} ${url}`);
    apiGroup = parts[1] ?? '';
    rest = parts.slice(3);
  }
  assert.equal(rest[0], 'namespaces', `not a namespaced request: ${method} ${url}`);
  const [, namespace = '', resource = '', itemName = '', subresource] = rest;
  assert.equal(subresource, undefined, `a subresource request: ${method} ${url}`);
  const watching = ['true', '1'].includes(parsed.searchParams.get('watch') ?? '');
  const verbs: Record<string, string> = itemName
    ? { GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }
    : { GET: watching ? 'watch' : 'list', POST: 'create', DELETE: 'deletecollection' };
  const verb = verbs[method];
  assert.ok(verb, `unexpected ${method} ${url}`);
  let name = itemName;
  if (!name && (verb === 'list' || verb === 'watch')) {
    name = /^metadata\.name=([^,]+)$/.exec(parsed.searchParams.get('fieldSelector') ?? '')?.[1] ?? '';
  }
  return { verb, apiGroup, resource, namespace, name, request: `${method} ${parsed.pathname}${parsed.search}` };
}

/** The RBAC authorizer's match of one rule: group, resource and verb listed (no wildcards here), and a name listed when the rule names any. */
function allows(rule: PolicyRule, attributes: Attributes): boolean {
  return (
    (rule.apiGroups ?? []).includes(attributes.apiGroup) &&
    (rule.resources ?? []).includes(attributes.resource) &&
    rule.verbs.includes(attributes.verb) &&
    ((rule.resourceNames ?? []).length === 0 || (rule.resourceNames ?? []).includes(attributes.name))
  );
}

/** A proxy in front of the fake API that records every request's method and URL, streaming (watch) answers included. */
async function recordingProxy(upstream: string): Promise<{ url: string; seen: Array<{ method: string; url: string }>; close(): Promise<void> }> {
  const target = new URL(upstream);
  const seen: Array<{ method: string; url: string }> = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '' });
    const forwarded = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    res.on('close', () => forwarded.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

function kubeConfigFor(url: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'proxy', server: url, skipTLSVerify: true }],
    users: [{ name: 'proxy', token: 'fake-token' }],
    contexts: [{ name: 'proxy', cluster: 'proxy', user: 'proxy', namespace: 'default' }],
    currentContext: 'proxy',
  });
  return kubeConfig;
}

describe('role.yaml against the requests the Kubernetes lock sends', () => {
  const NS = 'leasebeat';
  let fake: FakeLeaseServer;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let requests: Attributes[] = [];

  before(async () => {
    fake = await FakeLeaseServer.start();
    proxy = await recordingProxy(fake.url);
    const kubeConfig = kubeConfigFor(proxy.url);
    const timings = { leaseDurationMs: 1_000, renewDeadlineMs: 750, retryPeriodMs: 200 };
    const candidate = (identity: string) => {
      const lock = new KubernetesLeaseLock({ namespace: NS, name: leaseName, identity, kubeConfig });
      const stop = new AbortController();
      const state = { leading: false, led: false, leaders: [] as string[] };
      const elector = new LeaderElector({
        lock,
        ...timings,
        releaseOnCancel: true,
        callbacks: {
          onStartedLeading: () => {
            state.leading = true;
            state.led = true;
          },
          onStoppedLeading: () => {
            state.leading = false;
          },
          onNewLeader: (leader) => void state.leaders.push(leader),
        },
      });
      const run = elector.run(stop.signal);
      return { lock, stop, state, run };
    };

    // A creates the Lease and leads, renewing a few times; B follows it on the change feed.
    const a = candidate('a');
    await until('a to lead', () => a.state.leading || undefined, 10_000);
    const b = candidate('b');
    await until('b to see a lead', () => b.state.leaders.includes('a') || undefined, 10_000);
    await until('b to watch', () => proxy.seen.some((r) => attributesOf(r.method, r.url).verb === 'watch') || undefined, 10_000);
    await new Promise((r) => setTimeout(r, 3 * timings.retryPeriodMs));
    // A stops: it releases, and B takes the released Lease over; then B stops and releases too.
    a.stop.abort();
    await a.run;
    await until('b to lead', () => b.state.leading || undefined, 10_000);
    b.stop.abort();
    await b.run;
    await Promise.all([a.lock.flushEvents(), b.lock.flushEvents()]);
    requests = proxy.seen.map((r) => attributesOf(r.method, r.url));
  });

  after(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('the scenario ran: the Lease was created, renewed, released, taken over, and Events were recorded', () => {
    assert.ok(fake.events().length >= 2, 'became leader / stopped leading Events');
    const verbs = new Set(requests.map((r) => `${r.resource}:${r.verb}`));
    for (const wanted of ['leases:create', 'leases:update', 'leases:watch', 'events:create']) assert.ok(verbs.has(wanted), `no ${wanted} request`);
  });

  it('every request is allowed by a rule of role.yaml', () => {
    const denied = requests.filter((r) => !rules.some((rule) => allows(rule, r)));
    assert.deepEqual(denied.map((r) => `${r.verb} ${r.request}`), []);
  });

  it('every verb role.yaml grants is used: nothing is granted that the lock does not send', () => {
    const unused = rules.flatMap((rule, i) =>
      rule.verbs
        .filter((verb) => !requests.some((r) => r.verb === verb && allows({ ...rule, verbs: [verb] }, r)))
        .map((verb) => `rule ${i} (${(rule.resources ?? []).join(',')}) verb ${verb}`),
    );
    assert.deepEqual(unused, []);
  });

  it('the Lease is named in every request but create, which is why create has a rule of its own', () => {
    for (const r of requests.filter((q) => q.resource === 'leases')) {
      if (r.verb === 'create') assert.equal(r.name, '', `${r.request}: a create names nothing the authorizer can see`);
      else assert.equal(r.name, leaseName, `${r.request} is not scoped to the Lease ${leaseName}`);
      assert.equal(r.namespace, NS);
    }
    const named = rules.find((rule) => (rule.resourceNames ?? []).length > 0);
    assert.ok(named, 'no rule names the Lease');
    assert.deepEqual(named.resourceNames, [leaseName], 'resourceNames must equal LEASEBEAT_LEASE_NAME');
    const create = requests.find((r) => r.resource === 'leases' && r.verb === 'create');
    assert.ok(create && !allows({ ...named, verbs: ['create'] }, create), 'a named rule cannot allow the create');
  });

  it('the request translation follows kube-apiserver: a list or watch is named only by its field selector', () => {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`;
    assert.deepEqual(
      [
        attributesOf('GET', `${base}?fieldSelector=metadata.name%3Dx&watch=true`),
        attributesOf('GET', base),
        attributesOf('GET', `${base}/x`),
        attributesOf('POST', `/api/v1/namespaces/${NS}/events`),
      ].map(({ verb, apiGroup, resource, name }) => ({ verb, apiGroup, resource, name })),
      [
        { verb: 'watch', apiGroup: 'coordination.k8s.io', resource: 'leases', name: 'x' },
        { verb: 'list', apiGroup: 'coordination.k8s.io', resource: 'leases', name: '' },
        { verb: 'get', apiGroup: 'coordination.k8s.io', resource: 'leases', name: 'x' },
        { verb: 'create', apiGroup: '', resource: 'events', name: '' },
      ],
    );
  });
});

// ---------------------------------------------------------------------------------------------------------
// The docs

/** The rules as the docs can state them: `<group>/<resource>[<names>]: verbs`, sorted. */
function describeRules(list: PolicyRule[]): string[] {
  return list
    .map((rule) => {
      const names = (rule.resourceNames ?? []).length > 0 ? `[${[...(rule.resourceNames ?? [])].sort().join(',')}]` : '';
      return `${(rule.apiGroups ?? []).join(',') || 'core'}/${(rule.resources ?? []).join(',')}${names}: ${[...rule.verbs].sort().join(',')}`;
    })
    .sort();
}

const backticked = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');

/**
 * A sentence of the form "<verbs> on the one Lease …, <verbs> on leases … and <verbs> on events", as
 * docs/elector.md writes it: the verbs are the backticked words before each "on".
 */
function rulesInProse(text: string, where: string): string[] {
  const flat = text.replace(/\s+/g, ' ');
  const match = /((?:`[a-z]+`(?:, | and |\/)?)+) on the one Lease\b.*?((?:`[a-z]+`(?:, | and )?)+) on `?leases`?.*?((?:`[a-z]+`(?:, | and )?)+) on `?events`?/.exec(flat);
  assert.ok(match, `${where}: no "<verbs> on the one Lease …, <verbs> on leases … <verbs> on events" sentence`);
  const [, named = '', leases = '', events = ''] = match;
  return describeRules([
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [leaseName], verbs: backticked(named) },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: backticked(leases) },
    { apiGroups: [''], resources: ['events'], verbs: backticked(events) },
  ]);
}

/** The section of a Markdown file under `heading`, up to the next heading of the same or a higher level. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`${heading}\n`);
  assert.ok(start >= 0, `no heading ${heading}`);
  const level = /^#+/.exec(heading)?.[0].length ?? 2;
  const rest = markdown.slice(start + heading.length);
  const next = new RegExp(`\\n#{1,${level}} `).exec(rest);
  return rest.slice(0, next ? next.index : undefined);
}

describe('the docs state the Role that role.yaml grants', () => {
  const granted = describeRules(rules);
  const electorDoc = readFileSync(join(repoRoot, 'docs/elector.md'), 'utf8');
  const deploymentDoc = readFileSync(join(repoRoot, 'docs/deployment.md'), 'utf8');

  it('docs/elector.md, the Kubernetes lock in "The two locks"', () => {
    const item = section(electorDoc, '## The two locks').split('\n- ').find((p) => p.includes('KubernetesLeaseLock'));
    assert.ok(item, 'no KubernetesLeaseLock item');
    const rbac = item.slice(item.indexOf('RBAC:'));
    assert.ok(rbac.startsWith('RBAC:'), 'the KubernetesLeaseLock item names no RBAC');
    assert.deepEqual(rulesInProse(rbac, 'docs/elector.md, The two locks'), granted);
  });

  it('docs/deployment.md, the RBAC table and what it says is not granted', () => {
    const rbac = section(deploymentDoc, '### RBAC: what each rule is for');
    const rows = rbac.split('\n').filter((line) => line.startsWith('| `') || line.startsWith('| core '));
    const documented = rows.map((row) => {
      const cell = row.split('|')[1] ?? '';
      const [head = '', ...verbPart] = cell.split(/\bverbs? /);
      const tokens = backticked(head);
      const core = head.trim().startsWith('core ');
      const names = /resourceNames: \[([^\]]*)\]/.exec(head)?.[1];
      return {
        apiGroups: [core ? '' : (tokens[0] ?? '')],
        resources: [core ? (tokens[0] ?? '') : (tokens[1] ?? '')],
        ...(names ? { resourceNames: names.split(',').map((n) => n.trim()) } : {}),
        verbs: backticked(verbPart.join(' ')),
      };
    });
    assert.deepEqual(describeRules(documented), granted);
    const count = /The Role grants (\w+) rules/.exec(rbac)?.[1];
    assert.equal(count, ['zero', 'one', 'two', 'three', 'four', 'five'][rules.length], 'the number of rules');
    // "… and nothing else: no wildcards, no `patch` …": none of those may be granted.
    const denial = /nothing else:([^.]*)\./.exec(rbac.replace(/\s+/g, ' '))?.[1] ?? '';
    assert.ok(denial, 'no "nothing else: …" sentence');
    const grantedVerbs = new Set(rules.flatMap((rule) => rule.verbs));
    assert.deepEqual(backticked(denial).filter((word) => grantedVerbs.has(word)), [], 'the docs deny a verb the Role grants');
  });
});
