/** What the status page and the per-job page share: escaping, the CSP, the style and the browser-side helpers. */

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

/** The Content-Security-Policy of the pages: only its own nonce-tagged script and style run. */
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

/** A page's opening up to its body: `title` after "leasebeat · ", `style` under the page's CSP nonce (both escaped here). */
export function pageHead(title: string, nonce: string, style: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leasebeat · ${escapeHtml(title)}</title>
<style nonce="${escapeHtml(nonce)}">${style}</style>
</head>`;
}

/** The pages' style sheet (light and dark). */
export const PAGE_STYLE = `
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
/* Forms: the actions of the Schedules section and of the per-job page. */
[hidden] { display: none !important; }
.toolbar input, .actions input { font: inherit; padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); min-width: 14rem; }
button { font: inherit; padding: .25rem .7rem; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); cursor: pointer; }
button:disabled { opacity: .5; cursor: default; }
button.link { border: 0; background: none; padding: 0; color: var(--accent); font-weight: 600; text-align: left; white-space: nowrap; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin-top: .9rem; padding-top: .8rem; border-top: 1px solid var(--line); }
.actions input { flex: 1 1 12rem; min-width: 10rem; }
.action-result { margin: .4rem 0 0; overflow-wrap: anywhere; }
`;

/*
 * Browser-side helpers the pages' scripts open with: DOM building that sets text only through text nodes
 * (no value from the server is ever parsed as HTML), time and duration text, tables, and JSON calls to
 * the page's own API (same-origin, so the API's guards see the browser's Origin and credentials).
 */
export const PAGE_HELPERS = `
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
  function badge(text, kind) {
    return h('span', { class: 'badge ' + (kind || '') }, text);
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
`;
