import { escapeHtml, jsonForScript, PAGE_HELPERS, PAGE_STYLE, pageHead } from './page-kit.js';

/**
 * The per-job page (`/jobs/<name>`): one job or runtime schedule as `leasebeat describe` shows it (its
 * state, definition hash, next ticks, newest runs with duration, lag, term and instance, its backfills
 * and their progress), with its actions (trigger, pause with a note, resume, backfill) through the admin API, behind the same credentials and
 * origin check as every other write. It renders in the browser from `/api/jobs/<name>/describe`, read
 * again every 5 s, and builds DOM nodes only (see page-kit.ts).
 */
export function renderJobPage(options: { name: string; nonce: string; boardPath: string; readOnly: boolean }): string {
  const name = escapeHtml(options.name);
  const nonce = escapeHtml(options.nonce);
  return `${pageHead(options.name, options.nonce, PAGE_STYLE + STYLE)}
<body data-board="${escapeHtml(options.boardPath)}">
<header><h1>leasebeat</h1><span>${name}</span>
<nav><a href="/">Status</a><a href="${escapeHtml(options.boardPath)}">Bull Board</a><a id="json" href="/api/jobs/${escapeHtml(encodeURIComponent(options.name))}/describe">JSON</a></nav></header>
<main><div id="app" class="contents"><noscript>This page renders with JavaScript; the same data is at its JSON link.</noscript></div></main>
<footer id="updated"></footer>
<script type="application/json" id="job">${jsonForScript({ name: options.name, readOnly: options.readOnly })}</script>
<script nonce="${nonce}">${SCRIPT}</script>
</body>
</html>
`;
}

const STYLE = `
tr.run.older td:last-child { color: var(--warn); }
.job-actions { margin-top: 0; padding-top: 0; border-top: 0; }
.backfill-form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .3rem 0 .6rem; }
.backfill-form input, .backfill-form select { font: inherit; padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); }
.backfill-form input[type=text] { width: 15rem; }
.backfill-form input[type=number] { width: 6rem; }
progress { width: 8rem; vertical-align: middle; }
`;

/** How many runs and next ticks the page shows. */
const RUNS = 20;
const TICKS = 10;

const SCRIPT = `
(() => {
  'use strict';
  const app = document.getElementById('app');
  const footer = document.getElementById('updated');
  const board = document.body.dataset.board;
  const page = JSON.parse(document.getElementById('job').textContent);
${PAGE_HELPERS}
  const describePath = '/api/jobs/' + encodeURIComponent(page.name) + '/describe?ticks=${TICKS}&runs=${RUNS}';
  let shown = null;
  let acting = false;
  let said = null;

  function duration(ms) {
    return ms === null || ms === undefined ? h('span', { class: 'empty' }, '—') : age(ms);
  }
  function runLink(run) {
    if (!run.jobId) return h('span', { class: 'empty' }, '—');
    return run.queue ? h('a', { href: board + '/queue/' + encodeURIComponent(run.queue) + '/' + encodeURIComponent(run.jobId) }, run.jobId) : run.jobId;
  }
  function runRow(run, current) {
    const what = run.kind === 'range' ? 'skipped ' + run.count + ' ticks' : run.kind === 'manual' ? 'manual, ' + run.fate : run.fate;
    // A run decided by another definition than the one loaded now (an edit since) is marked.
    const older = run.definition && current && run.definition !== current;
    return h('tr', { class: 'run' + (older ? ' older' : ''), 'data-run': run.jobId || run.tick },
      h('td', {}, time(run.tick), run.to ? h('span', { class: 'sub' }, '… ' + run.to) : null),
      h('td', {}, what, run.reason ? h('span', { class: 'sub' }, run.reason) : null, run.backfill ? h('span', { class: 'sub' }, 'backfill') : null),
      h('td', {}, runLink(run)),
      h('td', {}, run.state || h('span', { class: 'empty' }, '—'), run.error ? h('span', { class: 'sub' + (run.state === 'failed' ? ' bad' : '') }, run.error) : null),
      h('td', {}, run.startedAt ? time(run.startedAt) : h('span', { class: 'empty' }, '—')),
      h('td', { class: 'num' }, duration(run.durationMs)),
      h('td', { class: 'num' }, duration(run.lagMs)),
      h('td', { class: 'num' }, run.attempts === null ? '—' : run.attempts),
      h('td', {}, run.instance || h('span', { class: 'empty' }, '—')),
      h('td', {}, run.term ? h('code', {}, run.term) : h('span', { class: 'empty' }, '—')),
      h('td', {}, run.definition ? h('code', { title: older ? 'decided by an earlier definition' : 'the definition loaded now' }, run.definition) : h('span', { class: 'empty' }, '—')));
  }
  // Made once and kept across refreshes, so that a note being typed survives them.
  let actionsBox = null;
  function actions() {
    if (page.readOnly) return h('p', { class: 'note' }, 'This server is read-only: no actions.');
    if (actionsBox) return actionsBox;
    const note = h('input', { type: 'text', id: 'pause-note', maxlength: '500', placeholder: 'why (shown with the pause)', 'aria-label': 'Pause note' });
    const buttons = [['trigger', 'Trigger now'], ['pause', 'Pause'], ['resume', 'Resume']].map(([action, label]) =>
      h('button', { type: 'button', id: action, 'data-action': action }, label));
    for (const button of buttons) button.addEventListener('click', () => void act(shown, button.dataset.action, note));
    note.addEventListener('keydown', (event) => { if (event.key === 'Enter') void act(shown, 'pause', note); });
    actionsBox = h('div', { class: 'actions job-actions' }, buttons[0], note, buttons[1], buttons[2]);
    return actionsBox;
  }
  function backfillRow(b) {
    const listed = Object.entries(b.listed).filter(([, n]) => n > 0).map(([fate, n]) => fate + ' ' + n).join(', ');
    return h('tr', { class: 'backfill', 'data-backfill': b.id },
      h('td', {}, h('code', {}, b.id), h('span', { class: 'sub' }, 'by ' + b.by)),
      h('td', {}, badge(b.state, b.state === 'done' ? 'ok' : b.state === 'failed' ? 'bad' : 'warn'), b.error ? h('span', { class: 'sub bad' }, b.error) : null),
      h('td', {}, time(b.from), time(b.to)),
      h('td', {}, h('progress', { max: String(b.total || 1), value: String(b.done) }), ' ', b.done + '/' + b.total),
      h('td', { class: 'num' }, b.enqueued),
      h('td', {}, listed || '—'),
      h('td', {}, b.rate + '/s, ' + b.overlap + (b.includeSkipped ? ', include skipped' : '')));
  }
  // Made once, like the actions, so that what is being typed survives the refreshes.
  let backfillBox = null;
  function backfillForm() {
    if (page.readOnly) return null;
    if (backfillBox) return backfillBox;
    const field = (attributes) => h('input', { autocomplete: 'off', spellcheck: 'false', ...attributes });
    const from = field({ type: 'text', id: 'backfill-from', placeholder: 'from, e.g. 2026-01-01T00:00:00Z', 'aria-label': 'Backfill from' });
    const to = field({ type: 'text', id: 'backfill-to', placeholder: 'to (not in the future)', 'aria-label': 'Backfill to' });
    const rate = field({ type: 'number', id: 'backfill-rate', min: '1', placeholder: '10', 'aria-label': 'Runs a second' });
    const overlap = h('select', { id: 'backfill-overlap', 'aria-label': 'Overlap among the backfill runs' }, ['allow', 'skip', 'bufferAll'].map((name) => h('option', { value: name }, name)));
    const skipped = h('input', { type: 'checkbox', id: 'backfill-include-skipped' });
    const yes = h('input', { type: 'checkbox', id: 'backfill-yes' });
    const submit = h('button', { type: 'button', id: 'backfill' }, 'Backfill');
    submit.addEventListener('click', async () => {
      if (acting || !shown) return;
      acting = true;
      submit.disabled = true;
      const body = { from: from.value.trim(), to: to.value.trim(), overlap: overlap.value, includeSkipped: skipped.checked, yes: yes.checked,
        ...(rate.value ? { rate: Number(rate.value) } : {}) };
      try {
        const result = await sendJson('/api/jobs/' + encodeURIComponent(shown.name) + '/backfill', body);
        said = { ok: true, text: 'Backfill ' + result.id + ' queued: ' + result.total + ' ticks from ' + result.from + ' to ' + result.to + '.' };
      } catch (error) {
        said = { ok: false, text: 'backfill refused: ' + error.message };
      } finally {
        acting = false;
        submit.disabled = false;
      }
      await refresh();
    });
    backfillBox = h('div', { class: 'backfill-form' }, from, to, rate, overlap,
      h('label', {}, skipped, ' include skipped'), h('label', {}, yes, ' more than 100,000 ticks'), submit);
    return backfillBox;
  }
  async function act(job, action, input) {
    if (acting || !job) return;
    acting = true;
    for (const button of actionsBox.querySelectorAll('button')) button.disabled = true;
    const note = input.value.trim();
    // A runtime schedule's actions are the schedules API's; a file job's, the jobs API's.
    const base = job.kind === 'schedule' ? '/api/schedules/' : '/api/jobs/';
    try {
      const result = await sendJson(base + encodeURIComponent(job.name) + '/' + action, action === 'pause' && note ? { note } : {});
      said = { ok: true, text: action === 'trigger' ? 'Triggered: ' + result.jobId + ' in queue ' + result.queue
        : action === 'pause' ? (note ? 'Paused, with the note shown above.' : 'Paused.')
        : result.resumed ? 'Resumed.' : 'It was not paused at run time.' };
    } catch (error) {
      said = { ok: false, text: action + ' failed: ' + error.message };
    } finally {
      acting = false;
      for (const button of actionsBox.querySelectorAll('button')) button.disabled = false;
    }
    if (said.ok && action === 'pause') input.value = '';
    await refresh();
  }
  function render(job) {
    const skipped = Object.entries(job.skipped);
    app.replaceChildren(
      h('div', { class: 'cards' },
        h('section', { class: 'card' }, h('h2', {}, job.kind === 'schedule' ? 'Runtime schedule' : 'Job'), fields([
          ['Name', h('strong', { id: 'job-name' }, job.name)],
          ['Schedule', job.schedule ? [h('code', {}, job.schedule), ' ', job.timezone || ''] : h('span', { class: 'empty' }, 'definition not loaded here')],
          ['Queue', job.queue || '—'],
          ['State', h('span', { id: 'job-state' }, job.paused ? badge('paused', 'warn') : badge('active', 'ok'),
            job.paused && job.pauseNote ? h('span', { class: 'sub pause-note' }, job.pauseNote) : null)],
          ['Definition', job.definition ? h('code', { id: 'job-definition' }, job.definition) : '—'],
          ['Last tick', time(job.lastTick)],
          ['Staged', job.staged.length ? job.staged.join(', ') : '—'],
        ])),
        h('section', { class: 'card' }, h('h2', {}, 'Counts'), fields([
          ['Enqueued', h('span', { id: 'job-enqueued' }, job.enqueued)],
          ['Skipped', skipped.length ? skipped.map(([reason, n]) => reason + ' ' + n).join(', ') : '0'],
          ['Fenced', job.fenced],
          ['Failed in a row', h('span', { class: job.failedInARow ? 'bad' : '' }, job.failedInARow)],
        ]),
        actions(),
        said ? h('p', { id: 'action-result', class: 'action-result ' + (said.ok ? 'ok' : 'bad') }, said.text) : null),
        h('section', { class: 'card' }, h('h2', {}, 'Next ticks'),
          job.nextTicks.length ? h('ol', { id: 'next-ticks' }, job.nextTicks.map((tick) => h('li', {}, time(tick)))) : h('p', { class: 'empty' }, 'None known here.'))),
      h('section', {}, h('h2', {}, 'Newest runs', h('span', { class: 'hint' }, 'ticks, skipped ranges and manual runs, newest first')),
        table(['Tick', 'Fate', 'Run', 'State', 'Started', 'Took', 'Lag', 'Attempts', 'Instance', 'Term', 'Definition'],
          job.runs.map((run) => runRow(run, job.definition)), 'Nothing recorded yet.')),
      h('section', { id: 'backfills' }, h('h2', {}, 'Backfills', h('span', { class: 'hint' }, 'the ticks of a past range with no run, run once each by the leader')),
        backfillForm(),
        table(['Backfill', 'State', 'Range', 'Progress', 'Enqueued', 'Listed, not run', 'Options'], job.backfills.map(backfillRow), 'No backfill yet.')));
  }
  function stamp(text, failed) {
    footer.textContent = text;
    footer.className = failed ? 'bad' : '';
  }
  async function refresh() {
    try {
      shown = await getJson(describePath);
      document.title = 'leasebeat · ' + shown.name;
      render(shown);
      stamp('Updated ' + new Date().toLocaleTimeString() + ' · refreshes every 5 s');
    } catch (error) {
      // What was read last stays on screen, under what does not answer now.
      if (!shown) app.replaceChildren(h('section', { class: 'card outage' }, h('h2', { class: 'bad' }, page.name), h('p', { id: 'job-error' }, error.message)));
      stamp('Refresh failed (' + error.message + ')' + (shown ? '; showing older data' : ''), true);
    }
  }
  void refresh();
  setInterval(() => { if (!document.hidden && !acting) void refresh(); }, 5000);
})();
`;
