import type { StatusSnapshot } from './sources.js';

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]!);
}

/**
 * Serializes a value as JSON that is safe inside a `<script type="application/json">` element: nothing in it
 * can close the element or be read as markup.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** The Content-Security-Policy of the status page: only its own nonce-tagged script and style run. */
export function statusPagePolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

const STYLE = `
:root { color-scheme: light dark; --fg: #1d2330; --muted: #667085; --bg: #f7f8fa; --card: #fff; --line: #e3e6eb;
  --ok: #137a3a; --warn: #a15c00; --bad: #b42318; --accent: #2c5fd9; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8ec; --muted: #98a2b3; --bg: #14171c; --card: #1c2027;
  --line: #2c323c; --ok: #4cc27a; --warn: #e0a340; --bad: #f07167; --accent: #7aa2ff; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: baseline; padding: .8rem 1.2rem; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 1.15rem; margin: 0; }
header nav { margin-left: auto; display: flex; gap: 1rem; }
main { padding: 1rem 1.2rem; display: grid; gap: 1.2rem; }
h2 { font-size: 1rem; margin: 0 0 .4rem; }
a { color: var(--accent); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(20rem, 1fr)); gap: 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, time { font-family: ui-monospace, monospace; font-size: .92em; }
time, td > code { white-space: nowrap; }
.sub { display: block; color: var(--muted); font-size: .85em; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; border: 1px solid currentColor; font-size: .85em; }
.ok { color: var(--ok); } .warn { color: var(--warn); } .bad { color: var(--bad); }
.empty { color: var(--muted); margin: 0; }
footer { padding: 0 1.2rem 1rem; color: var(--muted); }
`;

/*
 * The page renders the snapshot in the browser, from the embedded JSON first and then from /api/status
 * every 5 s, so there is one renderer. It builds DOM nodes and sets text only through text nodes: no
 * snapshot value is ever parsed as HTML.
 */
const SCRIPT = `
(() => {
  'use strict';
  const app = document.getElementById('app');
  const footer = document.getElementById('updated');
  const board = document.body.dataset.board;

  function h(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function relative(ms) {
    const seconds = Math.round(Math.abs(ms) / 1000);
    const span = seconds < 90 ? seconds + ' s'
      : seconds < 5400 ? Math.round(seconds / 60) + ' min'
      : seconds < 172800 ? Math.round(seconds / 3600) + ' h'
      : Math.round(seconds / 86400) + ' d';
    return ms >= 0 ? 'in ' + span : span + ' ago';
  }
  function time(iso) {
    if (!iso) return h('span', { class: 'empty' }, '—');
    const at = Date.parse(iso);
    return h('time', { datetime: iso, title: iso }, iso.replace('T', ' ').replace(/\\.\\d+Z$/, 'Z'),
      Number.isNaN(at) ? null : h('span', { class: 'sub' }, relative(at - Date.now())));
  }
  function fields(rows) {
    return h('dl', {}, rows.map(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
  }
  function table(headings, rows, empty) {
    if (rows.length === 0) return h('p', { class: 'empty' }, empty);
    return h('table', {}, h('thead', {}, h('tr', {}, headings.map((text) => h('th', {}, text)))), h('tbody', {}, rows));
  }
  function total(counts) {
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  }

  function age(ms) {
    return ms < 1000 ? Math.round(ms) + ' ms' : ms < 90000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms / 60000) + ' min';
  }
  const CONDITION_CLASS = { Ready: 'ok', NotReady: 'warn', Unknown: 'bad' };
  const DISRUPTION_CLASS = { Normal: 'ok', PartialDisruption: 'warn', FullDisruption: 'bad' };
  function badge(text, kind) {
    return h('span', { class: 'badge ' + (kind || '') }, text);
  }
  function jobList(ids) {
    return ids && ids.length ? h('span', { class: 'sub' }, ids.join(', ')) : null;
  }

  function memberRow(m, leader) {
    const unknownJobs = m.activeJobsWhenUnknown || [];
    const heartbeat = typeof m.heartbeatAgeMs === 'number' ? h('span', {}, age(m.heartbeatAgeMs) + ' ago') : time(m.lastSeen);
    return h('tr', { class: 'member', 'data-member': m.identity },
      h('td', {}, m.identity, m.identity === leader ? [' ', badge('leader', 'ok')] : null,
        m.version ? h('span', { class: 'sub' }, 'v' + m.version) : null),
      h('td', {}, m.condition ? badge(m.condition, CONDITION_CLASS[m.condition]) : h('span', { class: 'empty' }, '—')),
      h('td', {}, m.role),
      h('td', {}, heartbeat),
      h('td', { class: 'num' }, m.activeJobs === undefined ? '—' : m.activeJobs, jobList(m.activeJobIds),
        unknownJobs.length ? h('span', { class: 'sub bad' }, 'active when Unknown: ' + unknownJobs.join(', ')) : null),
      h('td', {}, m.workers || '—',
        m.cordoned ? [' ', badge('cordoned', 'warn')] : m.cordonRequested ? [' ', badge('cordon requested', 'warn')] : null,
        m.draining ? [' ', badge('draining', 'warn')] : null,
        m.reason ? h('span', { class: 'sub warn' }, m.reason) : null));
  }

  function jobRow(job) {
    const skipped = Object.entries(job.skipped);
    const lastJob = job.lastJobId
      ? h('a', { href: board + '/queue/' + encodeURIComponent(job.queue) + '/' + encodeURIComponent(job.lastJobId) }, job.lastJobId)
      : h('span', { class: 'empty' }, '—');
    return h('tr', { class: 'job', 'data-job': job.name },
      h('td', {}, h('strong', {}, job.name), h('span', { class: 'sub' }, job.file)),
      h('td', {}, job.queue),
      h('td', {}, h('code', {}, job.schedule)),
      h('td', {}, job.timezone),
      h('td', {}, job.nextRuns.length ? job.nextRuns.slice(0, 3).map((iso) => h('div', {}, time(iso))) : h('span', { class: 'empty' }, '—')),
      h('td', {}, time(job.lastTick)),
      h('td', {}, lastJob),
      h('td', { class: 'num' }, job.enqueued),
      h('td', { class: 'num', title: skipped.map(([reason, n]) => reason + ': ' + n).join(', ') }, total(job.skipped),
        skipped.length ? h('span', { class: 'sub' }, skipped.map(([reason, n]) => reason + ' ' + n).join(', ')) : null),
      h('td', { class: 'num' + (job.fenced ? ' warn' : '') }, job.fenced),
      h('td', {}, job.paused ? h('span', { class: 'badge warn' }, 'paused') : h('span', { class: 'badge ok' }, 'active')));
  }

  function render(s) {
    const term = s.cluster.term;
    document.title = 'leasebeat · ' + s.instance.identity;
    app.replaceChildren(
      h('div', { class: 'cards' },
        h('section', { class: 'card' }, h('h2', {}, 'This instance'), fields([
          ['Identity', h('span', { id: 'identity' }, s.instance.identity)],
          ['Role', h('span', { class: 'badge ' + (s.instance.role === 'leader' ? 'ok' : '') }, s.instance.role)],
          ['Version', s.instance.version],
          ['Started', time(s.instance.startedAt)],
        ])),
        h('section', { class: 'card' }, h('h2', {}, 'Cluster'), fields([
          ['Lock', s.cluster.lock],
          ['Leader', s.cluster.leader ? h('span', { id: 'leader' }, s.cluster.leader) : h('span', { id: 'leader', class: 'bad' }, 'none')],
          ['Term', term ? h('span', {}, h('code', {}, term.generation), ' · ', term.leaderTransitions, ' transitions') : '—'],
          ['Acquired', term ? time(term.acquireTime) : '—'],
          ['Disruption', s.cluster.disruption
            ? h('span', { id: 'disruption', class: 'badge ' + DISRUPTION_CLASS[s.cluster.disruption] }, s.cluster.disruption)
            : h('span', { id: 'disruption', class: 'empty' }, 'not judged (no leader)')],
        ]))),
      h('section', {}, h('h2', {}, 'Members (' + s.cluster.members.length + ')'),
        table(['Identity', 'Condition', 'Role', 'Last heartbeat', 'Active jobs', 'State'],
          s.cluster.members.map((m) => memberRow(m, s.cluster.leader)), 'No members reported.')),
      h('section', {}, h('h2', {}, 'Jobs (' + s.jobs.length + ')'),
        table(['Job', 'Queue', 'Schedule', 'Time zone', 'Next runs', 'Last tick', 'Last job', 'Enqueued', 'Skipped', 'Fenced', 'State'],
          s.jobs.map(jobRow), 'No jobs loaded.')),
      h('section', {}, h('h2', { class: s.loadErrors.length ? 'bad' : '' }, 'Load errors (' + s.loadErrors.length + ')'),
        table(['File', 'Error'], s.loadErrors.map((e) => h('tr', {}, h('td', {}, h('code', {}, e.file)), h('td', { class: 'bad' }, e.message))), 'None.')));
  }

  function stamp(text, failed) {
    footer.textContent = text;
    footer.className = failed ? 'bad' : '';
  }
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch('/api/status', { cache: 'no-store', headers: { accept: 'application/json' } });
      if (!response.ok) throw new Error('HTTP ' + response.status);
      render(await response.json());
      stamp('Updated ' + new Date().toLocaleTimeString() + ' · refreshes every 5 s');
    } catch (error) {
      stamp('Refresh failed (' + error.message + '); showing older data', true);
    } finally {
      busy = false;
    }
  }
  render(JSON.parse(document.getElementById('snapshot').textContent));
  stamp('Loaded ' + new Date().toLocaleTimeString() + ' · refreshes every 5 s');
  setInterval(refresh, 5000);
  document.addEventListener('visibilitychange', refresh);
})();
`;

/**
 * The status page: a self-contained document (no external assets) that shows the cluster, the jobs and the
 * load errors of `snapshot`. Job lists live in Bull Board at `boardPath`; this page only links to them.
 */
export function renderStatusPage(options: { snapshot: StatusSnapshot; nonce: string; boardPath: string }): string {
  const { snapshot, nonce, boardPath } = options;
  const nonceAttr = escapeHtml(nonce);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leasebeat · ${escapeHtml(snapshot.instance.identity)}</title>
<style nonce="${nonceAttr}">${STYLE}</style>
</head>
<body data-board="${escapeHtml(boardPath)}">
<header><h1>leasebeat</h1><span>${escapeHtml(snapshot.instance.identity)}</span>
<nav><a href="${escapeHtml(boardPath)}">Bull Board</a><a href="/api/status">JSON</a><a href="/metrics">Metrics</a></nav></header>
<main id="app"><noscript>This page renders with JavaScript; the same data is at <a href="/api/status">/api/status</a>.</noscript></main>
<footer id="updated"></footer>
<script type="application/json" id="snapshot">${jsonForScript(snapshot)}</script>
<script nonce="${nonceAttr}">${SCRIPT}</script>
</body>
</html>
`;
}
