import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse, stringify } from 'yaml';
import { createMetrics, createScheduler, startHttpServer, type Scheduler } from '../../src/index.js';
import { useRedis } from '../support/redis-server.js';
import { until } from '../support/until.js';

const run = promisify(execFile);
const RULES = fileURLToPath(new URL('../../deploy/prometheus/rules.yaml', import.meta.url));
const JOBS = fileURLToPath(new URL('../fixtures/jobs-alerts/', import.meta.url));
const DASHBOARD = fileURLToPath(new URL('../../deploy/grafana/leasebeat.json', import.meta.url));

interface Rule {
  alert: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** `promtool` from Debian's `prometheus` package (.ci/run installs it). */
async function promtool(...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run('promtool', args);
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string };
    if (failed.code === 'ENOENT') throw new Error('promtool is not installed: apt-get install prometheus (.ci/run does)', { cause: error });
    return { code: Number(failed.code ?? 1), output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

/** Each exported series of the metrics named, as `name{label="value",…}` with its labels, from an exposition text. */
function seriesOf(exposition: string, names: string[]): Map<string, Array<Record<string, string>>> {
  const found = new Map<string, Array<Record<string, string>>>(names.map((name) => [name, []]));
  for (const line of exposition.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? /.exec(line);
    if (!match || !found.has(match[1]!)) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map(([, key, value]) => [key!, value!]));
    found.get(match[1]!)!.push(labels);
  }
  return found;
}

const selector = (name: string, labels: Record<string, string>): string => `${name}{${Object.entries(labels).map(([key, value]) => `${key}="${value}"`).join(',')}}`;

describe('deploy/prometheus/rules.yaml and the Grafana dashboard, checked with promtool against the series a real instance exports', () => {
  const redis = useRedis();
  const metrics = createMetrics();
  let scheduler: Scheduler;
  let dir: string;
  let rules: Rule[];
  let scraped: Map<string, Array<Record<string, string>>>;
  /** The whole of the instance's /metrics. */
  let exposition: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'leasebeat-rules-'));
    rules = (parse(await readFile(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((group) => group.rules);
    metrics.declare({ election: 'leasebeat', jobs: ['failing', 'tardy', 'flaky'] });
    scheduler = createScheduler({
      connection: redis.server.url,
      jobsDir: JOBS,
      identity: 'alerting',
      election: { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
      metrics: { election: metrics.electionMetrics, producer: metrics.producerMetrics, members: metrics.memberMetrics, workers: metrics.workerMetrics, schedules: metrics.scheduleMetrics },
    });
    await scheduler.start();
    // A failed run, a completed one and a late one, as this instance counts them.
    const counted = async (name: string, labels: Record<string, string>): Promise<boolean> => {
      const metric = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
      return metric.some((sample) => Object.entries(labels).every(([key, value]) => sample.labels[key] === value) && sample.value > 0);
    };
    await until('runs to fail, complete and start late', async () =>
      (await counted('leasebeat_runs_finished_total', { job: 'failing', outcome: 'failed' })) &&
      (await counted('leasebeat_runs_finished_total', { job: 'tardy', outcome: 'completed' })) &&
      (await counted('leasebeat_runs_late_total', { job: 'tardy' })) &&
      (await counted('leasebeat_runs_finished_total', { job: 'flaky', outcome: 'failed' })) &&
      (await counted('leasebeat_runs_finished_total', { job: 'flaky', outcome: 'completed' })) &&
      (await counted('leader_election_master_status', {})), 30_000);
    // Its /metrics as Prometheus scrapes it: the registry's and BullMQ's queue metrics.
    const http = await startHttpServer({ host: '127.0.0.1', port: 0, source: scheduler, metrics });
    try {
      exposition = await (await fetch(`${http.url}/metrics`)).text();
    } finally {
      await http.close();
    }
    scraped = seriesOf(exposition, [
      'leasebeat_ticks_skipped_total',
      'leasebeat_runs_late_total',
      'leasebeat_run_last_failure_timestamp_seconds',
      'leasebeat_run_last_success_timestamp_seconds',
      'leader_election_master_status',
    ]);
  });
  redis.beforeClose(() => scheduler.stop());

  it('the Grafana dashboard queries only metrics the instance exports', async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, 'utf8')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const exported = new Set([...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name, type]) => (type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name!])));
    const promql = new Set(['sum', 'max', 'by', 'rate', 'increase', 'histogram_quantile', 'time', 'le', 'kind', 'job', 'reason', 'outcome', 'queue', 'state', 'condition']);
    assert.ok(dashboard.panels.length > 0);
    for (const panel of dashboard.panels) {
      for (const { expr } of panel.targets) {
        const names = [...expr.replace(/\{[^}]*\}/g, '').replace(/\[[^\]]*\]/g, '').matchAll(/[a-z_][a-z0-9_]*/g)].map(([name]) => name).filter((name) => !promql.has(name));
        assert.ok(names.length > 0, `${panel.title}: ${expr} names a metric`);
        for (const name of names) assert.ok(exported.has(name), `${panel.title}: ${name} is exported (${expr})`);
      }
    }
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('promtool check rules: the file is valid', async () => {
    const { code, output } = await promtool('check', 'rules', RULES);
    assert.equal(code, 0, output);
    assert.match(output, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  it('promtool test rules: each alert fires on the series it is about, with its labels and annotations, and not on the others', { timeout: 60_000 }, async () => {
    /**
     * A scraped series of `name` whose labels include `labels`, as Prometheus stores it from pod `pod` of
     * namespace `namespace`: with the target's labels added, and (honor_labels, as the shipped PodMonitor
     * scrapes) leasebeat's own `job` kept.
     */
    const series = (name: string, labels: Record<string, string>, pod = 'leasebeat-0', namespace = 'prod'): string => {
      const match = scraped.get(name)!.find((found) => Object.entries(labels).every(([key, value]) => found[key] === value));
      assert.ok(match, `the instance exports ${selector(name, labels)}`);
      return selector(name, { job: `${namespace}/leasebeat`, ...match, namespace, pod, instance: `${pod}:8080` });
    };
    const rule = (alert: string): Rule => rules.find((candidate) => candidate.alert === alert)!;
    /** What promtool must see: the rule's labels and annotations, its templates filled in with `labels`. */
    const expected = (alert: string, labels: Record<string, string>): object => {
      const fill = (text: string): string => text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, key: string) => labels[key] ?? '');
      return {
        exp_labels: { ...labels, ...rule(alert).labels },
        exp_annotations: Object.fromEntries(Object.entries(rule(alert).annotations ?? {}).map(([key, text]) => [key, fill(text)])),
      };
    };
    const prod = { namespace: 'prod' };
    const leader = (pod: string, values: string, namespace = 'prod'): object => ({ series: series('leader_election_master_status', {}, pod, namespace), values });
    const tests = [
      {
        interval: '1m',
        input_series: [
          // A tick missed past the window fires; overlap skips, which the job's own rule decides, do not.
          { series: series('leasebeat_ticks_skipped_total', { job: 'failing', reason: 'missed-window' }), values: '0 0 3 3 3' },
          { series: series('leasebeat_ticks_skipped_total', { job: 'tardy', reason: 'overlap' }), values: '0 5 10 15 20' },
          { series: series('leasebeat_runs_late_total', { job: 'tardy' }), values: '0 0 2 2 2' },
          { series: series('leasebeat_runs_late_total', { job: 'failing' }), values: '0 0 0 0 0' },
          // failing never completed; flaky's newest end is a failure; tardy only completes.
          { series: series('leasebeat_run_last_failure_timestamp_seconds', { job: 'failing' }), values: '100 160 220 280 340' },
          { series: series('leasebeat_run_last_failure_timestamp_seconds', { job: 'flaky' }), values: '100 200 300 400 500' },
          { series: series('leasebeat_run_last_success_timestamp_seconds', { job: 'flaky' }), values: '150 250 350 350 350' },
          { series: series('leasebeat_run_last_success_timestamp_seconds', { job: 'tardy' }), values: '100 160 220 280 340' },
          // One leader in each of two deployments.
          leader('leasebeat-0', '1 1 1 1 1'),
          leader('leasebeat-1', '0 0 0 0 0'),
          leader('leasebeat-0', '1 1 1 1 1', 'staging'),
        ],
        alert_rule_test: [
          { eval_time: '3m', alertname: 'LeasebeatTickMissed', exp_alerts: [expected('LeasebeatTickMissed', { ...prod, job: 'failing', reason: 'missed-window' })] },
          { eval_time: '3m', alertname: 'LeasebeatJobLate', exp_alerts: [expected('LeasebeatJobLate', { ...prod, job: 'tardy' })] },
          { eval_time: '1m', alertname: 'LeasebeatJobFailing', exp_alerts: [expected('LeasebeatJobFailing', { ...prod, job: 'failing' })] },
          {
            eval_time: '3m',
            alertname: 'LeasebeatJobFailing',
            exp_alerts: [expected('LeasebeatJobFailing', { ...prod, job: 'failing' }), expected('LeasebeatJobFailing', { ...prod, job: 'flaky' })],
          },
          { eval_time: '3m', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
          { eval_time: '3m', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [] },
        ],
      },
      {
        // A crash failover as the shipped PodMonitor sees it (30 s scrapes): the leader's series goes stale,
        // the follower leads a lease duration later. Not an alert.
        interval: '30s',
        input_series: [leader('leasebeat-0', '1 1 stale stale stale stale'), leader('leasebeat-1', '0 0 0 1 1 1')],
        alert_rule_test: [
          { eval_time: '90s', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
          { eval_time: '150s', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
        ],
      },
      {
        interval: '30s',
        input_series: [leader('leasebeat-0', '0 0 0 0 0 0'), leader('leasebeat-1', '0 0 0 0 0 0')],
        alert_rule_test: [
          { eval_time: '30s', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
          { eval_time: '90s', alertname: 'LeasebeatNoLeader', exp_alerts: [expected('LeasebeatNoLeader', { ...prod, name: 'leasebeat' })] },
        ],
      },
      {
        interval: '30s',
        input_series: [leader('leasebeat-0', '1 1 1 1 1 1'), leader('leasebeat-1', '1 1 1 1 1 1')],
        alert_rule_test: [
          { eval_time: '30s', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [] },
          { eval_time: '90s', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [expected('LeasebeatSeveralLeaders', { ...prod, name: 'leasebeat' })] },
        ],
      },
    ];
    const file = join(dir, 'rules.test.yaml');
    await writeFile(file, stringify({ rule_files: [RULES], evaluation_interval: '15s', tests }));
    const { code, output } = await promtool('test', 'rules', file);
    assert.equal(code, 0, output);
    // Every alert of the file is tested.
    for (const { alert } of rules) assert.ok(tests.some((test) => test.alert_rule_test.some((check) => check.alertname === alert && check.exp_alerts.length > 0)), `${alert} is tested firing`);
  });
});
