import type { HistorySnapshot } from './history.js';
import type { ReadinessCheck, StatusSnapshot } from './sources.js';
import { SCHEDULES_SCRIPT, SCHEDULES_STYLE, schedulesMarkup } from './status-schedules.js';

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
:root { color-scheme: light dark; --fg: #1d2330; --muted: #667085; --bg: #f4f6f9; --card: #fff; --line: #e3e6eb;
  --ok: #137a3a; --warn: #a15c00; --bad: #b42318; --accent: #2c5fd9;
  --t-ran: #2f9e5b; --t-late: #e3a008; --t-failed: #d92d20; --t-skipped: #98a2b3; --t-running: #2c5fd9;
  --t-queued: #84adff; --t-pending: #9e77ed; --t-gone: #d0d5dd;
  --h0: #2c5fd9; --h1: #12b76a; --h2: #f79009; --h3: #9e77ed; --h4: #ee46bc; --h5: #0ba5ec; --h6: #66c61c; --h7: #f04438; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8ec; --muted: #98a2b3; --bg: #111419; --card: #1a1e25;
  --line: #2c323c; --ok: #4cc27a; --warn: #e0a340; --bad: #f07167; --accent: #7aa2ff;
  --t-skipped: #667085; --t-gone: #344054; --t-queued: #5f84d6; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: baseline; padding: .8rem 1.2rem; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 1.15rem; margin: 0; letter-spacing: .01em; }
header nav { margin-left: auto; display: flex; gap: 1rem; }
main { padding: 1rem 1.2rem; display: grid; gap: 1.4rem; max-width: 1600px; }
h2 { font-size: 1rem; margin: 0 0 .5rem; }
h2 .hint { font-weight: 400; color: var(--muted); font-size: .85rem; margin-left: .5rem; }
a { color: var(--accent); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(20rem, 1fr)); gap: 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .8rem 1rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0; }
dt { color: var(--muted); }
dd { margin: 0; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
main > *, .contents > * { min-width: 0; }
/* #app and #app-after only split the sections around the schedules, which the 5 s re-render leaves alone. */
.contents { display: contents; }
table { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
th, td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
tbody tr:last-child td { border-bottom: 0; }
th { color: var(--muted); font-weight: 600; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.mid { vertical-align: middle; }
code, time { font-family: ui-monospace, monospace; font-size: .92em; }
time, td > code { white-space: nowrap; }
.sub { display: block; color: var(--muted); font-size: .85em; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; border: 1px solid currentColor; font-size: .85em; white-space: nowrap; }
.ok { color: var(--ok); } .warn { color: var(--warn); } .bad { color: var(--bad); } .muted { color: var(--muted); }
.empty { color: var(--muted); margin: 0; }
footer { padding: 0 1.2rem 1rem; color: var(--muted); }

.strip { display: flex; gap: 3px; align-items: center; flex-wrap: nowrap; }
.strip-foot { display: flex; justify-content: space-between; gap: 1rem; margin-top: .3rem; max-width: 100%; }
.strip-box { display: inline-block; max-width: 100%; }
.tick { display: inline-block; width: 13px; height: 24px; border-radius: 3px; background: var(--t-gone); flex: none; }
.tick.ran { background: var(--t-ran); } .tick.late { background: var(--t-late); } .tick.failed { background: var(--t-failed); }
.tick.skipped { background: var(--t-skipped); } .tick.running { background: var(--t-running); } .tick.queued { background: var(--t-queued); }
.tick.pending { background: transparent; border: 2px solid var(--t-pending); }
.tick.manual { box-shadow: inset 0 5px 0 var(--fg); }
.tick.skipped.range { width: 29px; background: repeating-linear-gradient(135deg, var(--t-skipped) 0 3px, transparent 3px 6px); border: 1px solid var(--t-skipped); }
a.tick:hover, a.tick:focus { outline: 2px solid var(--fg); outline-offset: 1px; }
.legend { display: flex; flex-wrap: wrap; gap: .4rem 1rem; color: var(--muted); font-size: .85em; margin: .4rem 0 0; }
.legend .tick { width: 10px; height: 10px; vertical-align: -1px; margin-right: .3rem; }
.counts { font-size: .85em; color: var(--muted); white-space: nowrap; }
.counts b { font-weight: 600; color: var(--fg); }
svg.lag { display: block; width: 220px; height: 44px; overflow: visible; margin-right: 2.5rem; }
svg.lag .grid { stroke: var(--line); stroke-width: 1; }
svg.lag .limit { stroke: var(--t-late); stroke-width: 1; stroke-dasharray: 3 3; }
svg.lag .line { fill: none; stroke: var(--accent); stroke-width: 1.5; stroke-linejoin: round; }
svg.lag .dot { fill: var(--accent); } svg.lag .dot.late { fill: var(--t-late); } svg.lag .dot.failed { fill: var(--t-failed); }
svg.lag text { fill: var(--muted); font: 10px ui-monospace, monospace; }

.timeline { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: .8rem 1rem .5rem; margin-bottom: .6rem; }
.tl-bar { position: relative; height: 30px; border-radius: 4px; background: repeating-linear-gradient(135deg, var(--line) 0 4px, transparent 4px 8px); }
.tl-term { position: absolute; top: 0; bottom: 0; border-radius: 3px; color: #fff; font-size: .8rem; line-height: 30px; padding: 0 .45rem;
  overflow: hidden; white-space: nowrap; text-overflow: ellipsis; box-shadow: inset -1px 0 0 var(--card); }
.tl-term.current { background-image: linear-gradient(90deg, transparent 85%, rgba(255,255,255,.25)); }
.tl-axis { display: flex; justify-content: space-between; color: var(--muted); font: 11px ui-monospace, monospace; margin-top: .3rem; }
.h0 { --c: var(--h0); } .h1 { --c: var(--h1); } .h2 { --c: var(--h2); } .h3 { --c: var(--h3); }
.h4 { --c: var(--h4); } .h5 { --c: var(--h5); } .h6 { --c: var(--h6); } .h7 { --c: var(--h7); }
.tl-term { background-color: var(--c); } .swatch { background: var(--c); }
.swatch { display: inline-block; width: .7em; height: .7em; border-radius: 2px; margin-right: .4em; vertical-align: 0; }
.note { color: var(--muted); font-size: .85em; margin: .4rem 0 0; }
.outage { border-color: var(--bad); }
.outage table { margin: .5rem 0; }
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
  const SVG = 'http://www.w3.org/2000/svg';

  function h(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  function s(tag, attributes, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value));
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
  function clock(ms, seconds) {
    return new Date(ms).toISOString().slice(11, seconds ? 19 : 16) + 'Z';
  }
  function span(from, to) {
    const seconds = to - from < 3600000;
    return clock(from, seconds) + ' → ' + clock(to, seconds);
  }
  function iso(ms) {
    return new Date(ms).toISOString().replace('T', ' ').replace(/\\.\\d+Z$/, 'Z');
  }
  function time(value) {
    if (!value) return h('span', { class: 'empty' }, '—');
    const at = Date.parse(value);
    return h('time', { datetime: value, title: value }, value.replace('T', ' ').replace(/\\.\\d+Z$/, 'Z'),
      Number.isNaN(at) ? null : h('span', { class: 'sub' }, relative(at - Date.now())));
  }
  function fields(rows) {
    return h('dl', {}, rows.map(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
  }
  function table(headings, rows, empty) {
    if (rows.length === 0) return h('p', { class: 'empty' }, empty);
    // Wide tables scroll inside their own box instead of widening the page.
    return h('div', { class: 'scroll' }, h('table', {}, h('thead', {}, h('tr', {}, headings.map((text) => h('th', {}, text)))), h('tbody', {}, rows)));
  }
  function total(counts) {
    return Object.values(counts).reduce((sum, n) => sum + n, 0);
  }
  function age(ms) {
    return ms < 1000 ? Math.round(ms) + ' ms' : ms < 90000 ? (ms / 1000).toFixed(1) + ' s' : ms < 5400000 ? Math.round(ms / 60000) + ' min' : (ms / 3600000).toFixed(1) + ' h';
  }
  function signed(ms) {
    return (ms < 0 ? '−' : '+') + age(Math.abs(ms));
  }
  const CONDITION_CLASS = { Ready: 'ok', NotReady: 'warn', Unknown: 'bad' };
  const DISRUPTION_CLASS = { Normal: 'ok', PartialDisruption: 'warn', FullDisruption: 'bad' };
  function badge(text, kind) {
    return h('span', { class: 'badge ' + (kind || '') }, text);
  }
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
      h('td', {}, h('strong', {}, job.name), h('span', { class: 'sub' }, job.file)),
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
  async function answerOf(response) {
    if (!response.ok) {
      // The API says what did not answer or what it refused ({ error }): that is the message worth showing;
      // else the first line of a plain answer (a guard's refusal, "internal error").
      const text = await response.text().catch(() => '');
      let body = null;
      try { body = JSON.parse(text); } catch { body = null; }
      const line = text.trim().split('\\n')[0].slice(0, 200);
      throw new Error(body && body.error ? body.error : 'HTTP ' + response.status + (line && !body ? ': ' + line : ''));
    }
    return response.json();
  }
  async function getJson(path, optional) {
    const response = await fetch(path, { cache: 'no-store', headers: { accept: 'application/json' } });
    if (optional && !response.ok) return null;
    return answerOf(response);
  }
  // A same-origin fetch carries what the API's guards check: the browser adds Origin and
  // Sec-Fetch-Site: same-origin (requireSameOrigin) and the Basic credentials it holds for this page; the
  // body is JSON, the only kind a write accepts.
  async function sendJson(path, body) {
    const response = await fetch(path, { method: 'POST', cache: 'no-store', credentials: 'same-origin',
      headers: { accept: 'application/json', 'content-type': 'application/json' }, body: JSON.stringify(body || {}) });
    return answerOf(response);
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
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leasebeat · ${identity}</title>
<style nonce="${nonceAttr}">${STYLE}</style>
</head>
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
