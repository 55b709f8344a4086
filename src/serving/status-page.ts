import type { HistorySnapshot } from './history.js';
import type { ReadinessCheck, StatusSnapshot } from './sources.js';
import { SCHEDULES_SCRIPT, SCHEDULES_STYLE, schedulesMarkup } from './status-schedules.js';
import { escapeHtml, jsonForScript, PAGE_HELPERS, PAGE_STYLE, pageHead } from './page-kit.js';

const STYLE = `${PAGE_STYLE}
${SCHEDULES_STYLE}`;

/*
 * The page renders in the browser, from the embedded JSON first and then from /api/status and
 * /api/history every 5 s, so there is one renderer (the schedules, never embedded, come from
 * /api/schedules a page at a time). It builds DOM nodes and sets text only through text
 * nodes: no value from the server is ever parsed as HTML. Colours come from classes (the CSP allows no
 * style attributes); chart geometry from SVG attributes.
 */
const SCRIPT = `
(() => {
  'use strict';
  const app = document.getElementById('app');
  const appAfter = document.getElementById('app-after');
  const footer = document.getElementById('updated');
  const board = document.body.dataset.board;
  // Each job has a page of its own where the admin API is served (the Schedules section's condition).
  const jobPages = document.getElementById('schedules') !== null;
${PAGE_HELPERS}
  const CONDITION_CLASS = { Ready: 'ok', NotReady: 'warn', Unknown: 'bad' };
  const DISRUPTION_CLASS = { Normal: 'ok', PartialDisruption: 'warn', FullDisruption: 'bad' };
  function jobList(ids) {
    return ids && ids.length ? h('span', { class: 'sub' }, ids.join(', ')) : null;
  }
  function jobLink(queue, id) {
    return board + '/queue/' + encodeURIComponent(queue) + '/' + encodeURIComponent(id);
  }

  // Only the lease holder leads: a record that still says "leader" belongs to a member that lost the lease.
  function roleOf(m, leader) {
    if (m.identity === leader) return 'leader';
    return m.role === 'leader' ? 'follower' : m.role;
  }
  function memberRow(m, leader) {
    const unknownJobs = m.activeJobsWhenUnknown || [];
    const heartbeat = typeof m.heartbeatAgeMs === 'number'
      ? h('span', { class: m.condition === 'Unknown' ? 'bad' : '' }, age(m.heartbeatAgeMs) + ' ago')
      : time(m.lastSeen);
    return h('tr', { class: 'member', 'data-member': m.identity },
      h('td', {}, m.identity, m.identity === leader ? [' ', badge('leader', 'ok')] : null,
        m.version ? h('span', { class: 'sub' }, 'v' + m.version) : null),
      h('td', {}, m.condition ? badge(m.condition, CONDITION_CLASS[m.condition]) : h('span', { class: 'empty' }, '—')),
      h('td', {}, roleOf(m, leader)),
      h('td', {}, heartbeat),
      h('td', { class: 'num' }, m.activeJobs === undefined ? '—' : m.activeJobs, jobList(m.activeJobIds),
        unknownJobs.length ? h('span', { class: 'sub bad' }, 'active when Unknown: ' + unknownJobs.join(', ')) : null),
      // Each thing said once, named (as leasebeat status says it): the record's draining flag is the
      // workers' draining, or a shutdown, which the reason says.
      h('td', {}, m.cordoned ? [badge('cordoned', 'warn'), ' '] : m.cordonRequested ? [badge('cordon requested', 'warn'), ' '] : null,
        'workers ' + (m.workers || '?'),
        m.reason ? h('span', { class: 'sub warn' }, m.reason) : null));
  }

  function jobRow(job) {
    const skipped = Object.entries(job.skipped);
    const lastJob = job.lastJobId
      ? h('a', { href: jobLink(job.queue, job.lastJobId) }, job.lastJobId)
      : h('span', { class: 'empty' }, '—');
    return h('tr', { class: 'job', 'data-job': job.name },
      h('td', {}, jobPages ? h('a', { href: '/jobs/' + encodeURIComponent(job.name) }, h('strong', {}, job.name)) : h('strong', {}, job.name), h('span', { class: 'sub' }, job.file)),
      h('td', {}, job.queue),
      h('td', {}, h('code', {}, job.schedule), h('span', { class: 'sub' }, job.timezone)),
      h('td', {}, job.nextRuns.length ? job.nextRuns.slice(0, 3).map((iso) => h('div', {}, time(iso))) : h('span', { class: 'empty' }, '—')),
      h('td', {}, time(job.lastTick)),
      h('td', {}, lastJob),
      h('td', { class: 'num' }, job.enqueued),
      h('td', { class: 'num', title: skipped.map(([reason, n]) => reason + ': ' + n).join(', ') }, total(job.skipped),
        skipped.length ? h('span', { class: 'sub' }, skipped.map(([reason, n]) => reason + ' ' + n).join(', ')) : null),
      h('td', { class: 'num' + (job.fenced ? ' warn' : '') }, job.fenced),
      h('td', {}, job.paused ? h('span', { class: 'badge warn' }, 'paused') : h('span', { class: 'badge ok' }, 'active'),
        job.paused && job.pauseNote ? h('span', { class: 'sub pause-note' }, job.pauseNote) : null));
  }

  // ---- Recent ticks: a strip per job and its enqueue lag ----
  const FATE_TEXT = { ran: 'ran', late: 'late', failed: 'failed', skipped: 'skipped', running: 'running', queued: 'queued',
    pending: 'claimed, not yet in BullMQ', gone: 'enqueued, no longer in BullMQ' };
  function tickTitle(t) {
    if (t.count !== undefined && t.count > 1) {
      return t.count + ' ticks skipped, ' + iso(t.tick) + ' to ' + iso(t.to) + (t.reason ? ' (' + t.reason + ')' : '');
    }
    const parts = [iso(t.tick) + (t.manual ? ' · manual run (leasebeat trigger)' : ''), FATE_TEXT[t.fate] + (t.fate === 'skipped' && t.reason ? ' (' + t.reason + ')' : '')];
    if (typeof t.lagMs === 'number') parts.push('enqueued ' + signed(t.lagMs) + (t.lagMs < 0 ? ' (staged ahead)' : ''));
    if (typeof t.startLagMs === 'number') parts.push('started ' + signed(t.startLagMs));
    if (typeof t.durationMs === 'number') parts.push('took ' + age(t.durationMs));
    if (t.fate === 'failed' && t.reason) parts.push(t.reason);
    if (t.jobId) parts.push(t.jobId);
    return parts.join(' · ');
  }
  function tickCell(t, queue) {
    const range = t.count !== undefined && t.count > 1;
    const attributes = { class: 'tick ' + t.fate + (range ? ' range' : '') + (t.manual ? ' manual' : ''), title: tickTitle(t), 'data-fate': t.fate, 'data-tick': String(t.tick) };
    if (typeof t.lagMs === 'number') attributes['data-lag'] = String(t.lagMs);
    if (typeof t.startLagMs === 'number') attributes['data-start-lag'] = String(t.startLagMs);
    if (t.jobId && t.fate !== 'pending' && t.fate !== 'gone') return h('a', Object.assign(attributes, { href: jobLink(queue, t.jobId), 'aria-label': attributes.title }));
    return h('span', Object.assign(attributes, { role: 'img', 'aria-label': attributes.title }));
  }
  // The lag users feel: when each run started minus its tick. Not the enqueue lag: a run staged ahead is
  // added before its tick (a negative lag), so its add says nothing of when it ran.
  function lagChart(ticks, lateAfterMs) {
    const points = ticks.filter((t) => typeof t.startLagMs === 'number');
    const width = 220, height = 44, top = 4, bottom = 4;
    if (points.length === 0) return h('span', { class: 'empty' }, 'no run started yet');
    const lags = points.map((t) => t.startLagMs);
    const sorted = lags.slice().sort((a, b) => a - b);
    const low = Math.min(0, sorted[0]);
    const high = Math.max(1, sorted[sorted.length - 1], Math.min(lateAfterMs, sorted[sorted.length - 1] * 2));
    const first = ticks[0].tick, last = ticks[ticks.length - 1].tick;
    const x = (tick) => (last === first ? width / 2 : ((tick - first) / (last - first)) * width);
    const y = (lag) => top + (1 - (lag - low) / (high - low)) * (height - top - bottom);
    const text = (ms) => (ms < 0 ? signed(ms) : age(ms));
    const svg = s('svg', { class: 'lag', viewBox: '0 0 ' + width + ' ' + height, role: 'img' });
    const label = 'start lag (run start − tick) of the last ' + points.length + ' runs: median ' + text(sorted[Math.floor(sorted.length / 2)]) +
      ', max ' + text(sorted[sorted.length - 1]);
    svg.setAttribute('aria-label', label);
    svg.append(s('title', {}, label));
    svg.append(s('line', { class: 'grid', x1: 0, x2: width, y1: y(0), y2: y(0) }));
    if (lateAfterMs <= high) svg.append(s('line', { class: 'limit', x1: 0, x2: width, y1: y(lateAfterMs), y2: y(lateAfterMs) }));
    svg.append(s('polyline', { class: 'line', points: points.map((t) => x(t.tick).toFixed(1) + ',' + y(t.startLagMs).toFixed(1)).join(' ') }));
    for (const t of points) {
      svg.append(s('circle', { class: 'dot ' + t.fate, cx: x(t.tick).toFixed(1), cy: y(t.startLagMs).toFixed(1), r: 2 }, s('title', {}, tickTitle(t))));
    }
    svg.append(s('text', { x: width + 4, y: top + 6 }, text(high)));
    svg.append(s('text', { x: width + 4, y: height - bottom + 2 }, low < 0 ? text(low) : '0'));
    return svg;
  }
  function fateCounts(ticks) {
    const counts = {};
    for (const t of ticks) counts[t.fate] = (counts[t.fate] || 0) + (t.count || 1);
    return h('span', { class: 'counts' }, ['ran', 'late', 'failed', 'skipped', 'running', 'queued', 'pending', 'gone']
      .filter((fate) => counts[fate]).map((fate, i) => [i ? ' · ' : '', h('b', {}, counts[fate]), ' ' + fate]));
  }
  function ticksSection(history) {
    const rows = history.jobs.map((job) => h('tr', { class: 'ticks', 'data-job': job.name },
      h('td', { class: 'mid' }, h('strong', {}, job.name), h('span', { class: 'sub' }, job.queue)),
      h('td', { class: 'mid' }, job.ticks.length
        ? h('div', { class: 'strip-box' }, h('div', { class: 'strip' }, job.ticks.map((t) => tickCell(t, job.queue))),
            h('div', { class: 'strip-foot' }, fateCounts(job.ticks),
              h('span', { class: 'counts span' }, span(job.ticks[0].tick, job.ticks[job.ticks.length - 1].to || job.ticks[job.ticks.length - 1].tick))))
        : h('span', { class: 'empty' }, 'no ticks recorded yet')),
      h('td', { class: 'mid' }, lagChart(job.ticks, history.lateAfterMs))));
    const legend = h('div', { class: 'legend' }, ['ran', 'late', 'failed', 'skipped', 'running', 'queued', 'pending', 'gone'].map((fate) =>
      h('span', {}, h('span', { class: 'tick ' + fate }), fate === 'late' ? 'late (> ' + age(history.lateAfterMs) + ')' : fate)),
      h('span', {}, h('span', { class: 'tick ran manual' }), 'manual run (leasebeat trigger)'));
    const limit = age(history.lateAfterMs);
    const meaning = h('p', { class: 'note', id: 'lag-meaning' },
      'Start lag (the chart; metric leasebeat_run_start_lag_seconds): when a run started (BullMQ: processedOn) minus its tick. ' +
      'Enqueue lag (on hover; leasebeat_schedule_lag_seconds): when it was added to BullMQ minus its tick, negative for a run staged ahead of its tick, ' +
      'which BullMQ promotes at the tick. Late: added more than ' + limit + ' after its tick, or, added ahead of it, started more than ' + limit + ' after it. ' +
      'A manual run is placed at its add.');
    return h('section', { id: 'ticks' }, h('h2', {}, 'Recent ticks', h('span', { class: 'hint' }, 'oldest left · hover for the lags · click to open the run in Bull Board')),
      table(['Job', 'Ticks', 'Start lag'], rows, 'No jobs loaded.'), legend, meaning);
  }

  // ---- Leadership terms ----
  const END_TEXT = { current: 'leading', released: 'released', expired: 'lease expired', 'taken-over': 'taken over before expiry', recreated: 'lease recreated' };
  const END_CLASS = { current: 'ok', released: '', expired: 'warn', 'taken-over': 'bad', recreated: 'warn' };
  function holderClasses(terms) {
    const classes = new Map();
    for (const term of terms) if (!classes.has(term.holder)) classes.set(term.holder, 'h' + (classes.size % 8));
    return classes;
  }
  // Positions are set through the CSSOM (element.style), which the CSP allows; style attributes it would not.
  function termsTimeline(terms, now, classes) {
    const start = Math.min(...terms.map((t) => t.acquiredAt));
    const end = Math.max(now, ...terms.map((t) => t.endedAt || t.lastRenewedAt));
    const at = (ms) => ((ms - start) / Math.max(1, end - start)) * 100;
    const bar = h('div', { class: 'tl-bar', role: 'img', 'aria-label': 'leadership terms over time; hatched: nobody led' });
    for (const term of terms) {
      const from = at(term.acquiredAt), to = at(term.end === 'current' ? end : term.endedAt || term.lastRenewedAt);
      const label = term.holder + ' · term ' + term.leaderTransitions + ' · ' + iso(term.acquiredAt) + ' → ' + (term.endedAt ? iso(term.endedAt) : 'now') + ' · ' + END_TEXT[term.end];
      const segment = h('div', { class: 'tl-term ' + classes.get(term.holder) + ' ' + term.end, title: label, 'data-holder': term.holder }, term.holder);
      segment.style.left = from.toFixed(3) + '%';
      segment.style.width = Math.max(0.25, to - from).toFixed(3) + '%';
      bar.append(segment);
    }
    const middle = start + (end - start) / 2;
    return h('div', { class: 'timeline' }, bar,
      h('div', { class: 'tl-axis' }, h('span', {}, iso(start)), h('span', {}, iso(middle)), h('span', {}, 'now ' + iso(now))));
  }
  function leadershipSection(history) {
    const l = history.leadership;
    const terms = l.terms;
    const classes = holderClasses(terms);
    const successor = (term) => terms[terms.indexOf(term) + 1];
    function handover(term) {
      const next = successor(term);
      if (!next || !term.endedAt) return null;
      const gap = next.acquiredAt - term.endedAt;
      return h('span', { class: 'sub' }, 'then ' + next.holder + (gap > 0 ? ', ' + age(gap) + ' later' : ''));
    }
    const rows = terms.slice().reverse().map((term) => h('tr', { class: 'term', 'data-holder': term.holder, 'data-end': term.end },
      h('td', {}, h('span', { class: 'swatch ' + classes.get(term.holder) }), term.holder),
      h('td', {}, h('code', {}, term.generation.slice(0, 8)), ' · ', term.leaderTransitions),
      h('td', {}, term.acquiredAt ? time(new Date(term.acquiredAt).toISOString()) : '—'),
      h('td', {}, term.endedAt ? time(new Date(term.endedAt).toISOString()) : h('span', { class: 'ok' }, 'now')),
      h('td', { class: 'num' }, age(Math.max(0, (term.endedAt || history.generatedAt) - term.acquiredAt))),
      h('td', {}, badge(END_TEXT[term.end], END_CLASS[term.end]),
        term.end === 'expired' ? h('span', { class: 'sub' }, 'last renewed ' + iso(term.lastRenewedAt) + ', lease ' + age(term.leaseDurationMs)) : null,
        handover(term))));
    return h('section', { id: 'leadership' }, h('h2', {}, 'Leadership', h('span', { class: 'hint' }, l.source === 'lease-history' ? 'from the lease\\'s write history' : 'current term only')),
      terms.length ? termsTimeline(terms, history.generatedAt, classes) : null,
      table(['Leader', 'Term', 'From', 'Until', 'Lasted', 'How it ended'], rows, 'No leadership term recorded.'),
      l.note ? h('p', { class: 'note' }, l.note) : null);
  }

  // The term in force, as Redis has it: the lease's write history (or the fence). A follower's own status
  // has no term, since it holds none.
  function currentTerm(history) {
    const current = history ? history.leadership.terms.filter((t) => t.end === 'current').pop() : undefined;
    return current ? { generation: current.generation, leaderTransitions: current.leaderTransitions, acquireTime: new Date(current.acquiredAt).toISOString() } : null;
  }

  // ---- When the status cannot be read (Redis down or hung): what did not answer, and this instance's checks ----
  function outageSection(outage) {
    const checks = outage.checks || [];
    return h('section', { id: 'outage', class: 'card outage', role: 'alert' },
      h('h2', { class: 'bad' }, 'The state of the cluster cannot be read'),
      h('p', { id: 'outage-problem' }, outage.problem),
      checks.length ? table(['Check of this instance', 'State', 'Detail'], checks.map((c) => h('tr', { class: 'check', 'data-check': c.name },
        h('td', {}, c.name),
        h('td', {}, badge(c.ok ? 'ok' : 'failing', c.ok ? 'ok' : 'bad'), c.required === false ? h('span', { class: 'sub' }, 'shown, not required for readiness') : null),
        h('td', {}, c.detail || ''))), '') : null,
      h('p', { class: 'note' }, 'Redis holds the lease (with the Redis lock), the tick ledger and the queues: while it does not answer, nothing is enqueued or run. ' +
        'This instance stays ready and keeps this page up; once Redis answers, the ticks missed meanwhile are caught up or recorded as skipped, per the catch-up window of each job.'));
  }

  function render(snap, history) {
    // Sections this source does not have are left out (replaceChildren would print a null as text).
    if (!snap) {
      app.replaceChildren(outageSection(outage));
      appAfter.replaceChildren();
      return;
    }
    // Definitions without a schedule are the job types schedules may name.
    if (schedules) schedules.offer(snap.jobs.filter((job) => job.schedule === 'job type').map((job) => job.name));
    const term = snap.cluster.term || currentTerm(history);
    document.title = 'leasebeat · ' + snap.instance.identity;
    app.replaceChildren(...[
      outage ? outageSection(outage) : null,
      h('div', { class: 'cards' },
        h('section', { class: 'card' }, h('h2', {}, 'This instance'), fields([
          ['Identity', h('span', { id: 'identity' }, snap.instance.identity)],
          ['Role', h('span', { class: 'badge ' + (snap.instance.role === 'leader' ? 'ok' : '') }, snap.instance.role)],
          ['Version', snap.instance.version],
          ['Started', time(snap.instance.startedAt)],
        ])),
        h('section', { class: 'card' }, h('h2', {}, 'Cluster'), fields([
          ['Lock', snap.cluster.lock],
          ['Leader', snap.cluster.leader ? h('span', { id: 'leader' }, snap.cluster.leader) : h('span', { id: 'leader', class: 'bad' }, 'none')],
          ['Term', term ? h('span', { id: 'term' }, h('code', {}, term.generation), ' · ', term.leaderTransitions, ' transitions') : h('span', { id: 'term', class: 'empty' }, '—')],
          ['Acquired', term ? time(term.acquireTime) : '—'],
          ['Disruption', snap.cluster.disruption
            ? h('span', { id: 'disruption', class: 'badge ' + DISRUPTION_CLASS[snap.cluster.disruption] }, snap.cluster.disruption)
            : h('span', { id: 'disruption', class: 'empty' }, 'not judged (no leader)')],
        ]))),
      history ? ticksSection(history) : null,
      h('section', {}, h('h2', {}, 'Jobs (' + snap.jobs.length + ')'),
        table(['Job', 'Queue', 'Schedule', 'Next runs', 'Last tick', 'Last job', 'Enqueued', 'Skipped', 'Fenced', 'State'],
          snap.jobs.map(jobRow), 'No jobs loaded.')),
    ].filter(Boolean));
    appAfter.replaceChildren(...[
      history ? leadershipSection(history) : null,
      h('section', {}, h('h2', {}, 'Members (' + snap.cluster.members.length + ')'),
        table(['Identity', 'Condition', 'Role', 'Last heartbeat', 'Active jobs', 'State'],
          snap.cluster.members.map((m) => memberRow(m, snap.cluster.leader)), 'No members reported.')),
      h('section', {}, h('h2', { class: snap.loadErrors.length ? 'bad' : '' }, 'Load errors (' + snap.loadErrors.length + ')'),
        table(['File', 'Error'], snap.loadErrors.map((e) => h('tr', {}, h('td', {}, h('code', {}, e.file)), h('td', { class: 'bad' }, e.message))), 'None.')),
    ].filter(Boolean));
  }

  function stamp(text, failed) {
    footer.textContent = text;
    footer.className = failed ? 'bad' : '';
  }
${SCHEDULES_SCRIPT}
  // /readyz answers without Redis, with a JSON body whatever its status.
  async function checksNow() {
    const response = await fetch('/readyz', { cache: 'no-store' }).catch(() => null);
    const body = response ? await response.json().catch(() => null) : null;
    return body ? body.checks : null;
  }
  const embedded = JSON.parse(document.getElementById('snapshot').textContent);
  const schedulesRoot = document.getElementById('schedules');
  const schedules = schedulesRoot ? schedulesView(schedulesRoot) : null;
  let history = embedded.history;
  let outage = embedded.outage;
  let shown = embedded.status;
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const [status, latest] = await Promise.all([getJson('/api/status'), embedded.hasHistory ? getJson('/api/history', true) : null]);
      // A history read that failed keeps the previous one on screen rather than blanking the strips.
      if (latest) history = latest;
      outage = null;
      shown = status;
      render(shown, history);
      stamp('Updated ' + new Date().toLocaleTimeString() + ' · refreshes every 5 s');
    } catch (error) {
      // The last state read stays on screen, under what does not answer now.
      outage = { problem: error.message, checks: await checksNow() };
      render(shown, history);
      stamp('Refresh failed (' + error.message + '); showing older data', true);
    } finally {
      busy = false;
    }
  }
  render(shown, history);
  stamp('Loaded ' + new Date().toLocaleTimeString() + ' · refreshes every 5 s');
  function refreshAll() {
    void refresh();
    if (schedules) schedules.refresh();
  }
  setInterval(refreshAll, 5000);
  document.addEventListener('visibilitychange', refreshAll);
})();
`;

/**
 * The status page: a self-contained document (no external assets) that shows the cluster, the jobs and the
 * load errors of `snapshot`, and, with a `history`, each job's recent ticks, its lag and the leadership terms.
 * With `schedules`, it also pages through the runtime schedules from `/api/schedules` (status-schedules.ts).
 * Job lists live in Bull Board at `boardPath`; this page only links to them.
 */
export function renderStatusPage(options: {
  /** Null when it could not be read: the page then shows `outage` and asks again every 5 s. */
  snapshot: StatusSnapshot | null;
  /** Shown while the status cannot be read: what did not answer, and this instance's readiness checks. */
  outage?: { problem: string; checks: ReadinessCheck[] };
  /** This instance's identity (the snapshot has it too, when there is one). */
  identity: string;
  /** Embedded for the first render; null when it could not be read in time (the page asks again). */
  history?: HistorySnapshot | null;
  /** Whether `/api/history` exists; default: whether `history` was given. */
  hasHistory?: boolean;
  /** When `/api/schedules` exists: the page shows the runtime schedules, with their actions unless `readOnly`. */
  schedules?: { readOnly: boolean };
  nonce: string;
  boardPath: string;
}): string {
  const { snapshot, nonce, boardPath } = options;
  const identity = escapeHtml(options.identity);
  const nonceAttr = escapeHtml(nonce);
  return `${pageHead(options.identity, nonce, STYLE)}
<body data-board="${escapeHtml(boardPath)}">
<header><h1>leasebeat</h1><span>${identity}</span>
<nav>${options.schedules ? '<a href="#schedules">Schedules</a>' : ''}<a href="${escapeHtml(boardPath)}">Bull Board</a><a href="/api/status">JSON</a><a href="/metrics">Metrics</a></nav></header>
<main><div id="app" class="contents"><noscript>This page renders with JavaScript; the same data is at <a href="/api/status">/api/status</a>.</noscript></div>
${options.schedules ? schedulesMarkup(options.schedules) : ''}<div id="app-after" class="contents"></div></main>
<footer id="updated"></footer>
<script type="application/json" id="snapshot">${jsonForScript({ status: snapshot, outage: options.outage ?? null, history: options.history ?? null, hasHistory: options.hasHistory ?? options.history != null })}</script>
<script nonce="${nonceAttr}">${SCRIPT}</script>
</body>
</html>
`;
}
