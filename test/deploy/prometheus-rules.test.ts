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
    metrics.declare({ election: 'leasebeat', jobs: ['failing', 'tardy'] });
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
      (await counted('leader_election_master_status', {})), 30_000);
    // Its /metrics as Prometheus scrapes it: the registry's and BullMQ's queue metrics.
    const http = await startHttpServer({ host: '127.0.0.1', port: 0, source: scheduler, metrics });
    try {
      exposition = await (await fetch(`${http.url}/metrics`)).text();
    } finally {
      await http.close();
    }
    scraped = seriesOf(exposition, ['leasebeat_ticks_skipped_total', 'leasebeat_runs_late_total', 'leasebeat_runs_finished_total', 'leader_election_master_status']);
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
    /** A scraped series of `name` whose labels include `labels`, as a promtool series on instance `instance`. */
    const series = (name: string, labels: Record<string, string>, instance = 'pod-a'): string => {
      const match = scraped.get(name)!.find((found) => Object.entries(labels).every(([key, value]) => found[key] === value));
      assert.ok(match, `the instance exports ${selector(name, labels)}`);
      return selector(name, { ...match, instance });
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
    const tests = [
      {
        interval: '1m',
        input_series: [
          // A tick missed past the window fires; overlap skips, which the job's own rule decides, do not.
          { series: series('leasebeat_ticks_skipped_total', { job: 'failing', reason: 'missed-window' }), values: '0 0 3 3 3' },
          { series: series('leasebeat_ticks_skipped_total', { job: 'tardy', reason: 'overlap' }), values: '0 5 10 15 20' },
          // failing: only failures; tardy: completions, and late starts.
          { series: series('leasebeat_runs_finished_total', { job: 'failing', outcome: 'failed' }), values: '0 1 2 3 4' },
          { series: series('leasebeat_runs_finished_total', { job: 'failing', outcome: 'completed' }), values: '0 0 0 0 0' },
          { series: series('leasebeat_runs_finished_total', { job: 'tardy', outcome: 'failed' }), values: '0 1 1 1 1' },
          { series: series('leasebeat_runs_finished_total', { job: 'tardy', outcome: 'completed' }), values: '0 5 10 15 20' },
          { series: series('leasebeat_runs_late_total', { job: 'tardy' }), values: '0 0 2 2 2' },
          { series: series('leasebeat_runs_late_total', { job: 'failing' }), values: '0 0 0 0 0' },
          // One leader, as it should be.
          { series: series('leader_election_master_status', {}, 'pod-a'), values: '1 1 1 1 1' },
          { series: series('leader_election_master_status', {}, 'pod-b'), values: '0 0 0 0 0' },
        ],
        alert_rule_test: [
          { eval_time: '3m', alertname: 'LeasebeatTickMissed', exp_alerts: [expected('LeasebeatTickMissed', { job: 'failing', reason: 'missed-window' })] },
          { eval_time: '3m', alertname: 'LeasebeatJobLate', exp_alerts: [expected('LeasebeatJobLate', { job: 'tardy' })] },
          { eval_time: '3m', alertname: 'LeasebeatJobFailing', exp_alerts: [expected('LeasebeatJobFailing', { job: 'failing' })] },
          { eval_time: '3m', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
          { eval_time: '3m', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [] },
        ],
      },
      {
        interval: '15s',
        input_series: [
          // No leader for a minute, then two for a minute.
          { series: series('leader_election_master_status', {}, 'pod-a'), values: '0 0 0 0 1 1 1 1 1' },
          { series: series('leader_election_master_status', {}, 'pod-b'), values: '0 0 0 0 1 1 1 1 1' },
        ],
        alert_rule_test: [
          { eval_time: '15s', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
          { eval_time: '45s', alertname: 'LeasebeatNoLeader', exp_alerts: [expected('LeasebeatNoLeader', {})] },
          { eval_time: '75s', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [] },
          { eval_time: '2m', alertname: 'LeasebeatSeveralLeaders', exp_alerts: [expected('LeasebeatSeveralLeaders', {})] },
          { eval_time: '2m', alertname: 'LeasebeatNoLeader', exp_alerts: [] },
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
