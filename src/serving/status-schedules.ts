/**
 * The status page's Schedules section: runtime schedules, a page at a time from `/api/schedules`, with a
 * detail view (`/describe`) and its actions (pause, resume, trigger) through the same API. Its script runs
 * inside the page's script (status-page.ts), with that script's helpers: `h`, `time`, `badge`, `table`,
 * `fields`, `relative`, `jobLink`, `getJson` and `sendJson`.
 */

/** Rows a page asks for: enough to scan, few enough that a page is one cheap read whatever the total. */
export const SCHEDULES_PAGE_SIZE = 50;

/** The section's placeholder in the page; the script fills it. Only when the server has the API. */
export function schedulesMarkup(options: { readOnly: boolean }): string {
  return `<section id="schedules" data-read-only="${options.readOnly ? 'true' : 'false'}" aria-labelledby="schedules-title"></section>`;
}

export const SCHEDULES_STYLE = `
.toolbar { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: 0 0 .6rem; }
.pager { margin-left: auto; display: flex; gap: .5rem; align-items: center; }
.pager span { color: var(--muted); font-variant-numeric: tabular-nums; }
.sched-layout { display: grid; gap: 1rem; grid-template-columns: minmax(0, 1fr); align-items: start; }
.sched-layout.with-detail { grid-template-columns: minmax(0, 1fr) minmax(22rem, 34rem); }
@media (max-width: 1100px) { .sched-layout.with-detail { grid-template-columns: minmax(0, 1fr); } }
.sched-table.loading { opacity: .6; }
tr.schedule { cursor: pointer; }
tr.schedule:hover td { background: color-mix(in srgb, var(--accent) 6%, transparent); }
tr.schedule.selected td { background: color-mix(in srgb, var(--accent) 13%, transparent); }
tr.schedule.problem td:first-child { box-shadow: inset 3px 0 0 var(--warn); }
tr.schedule.problem-invalid td:first-child { box-shadow: inset 3px 0 0 var(--bad); }
.detail { position: sticky; top: .8rem; }
.detail-head { display: flex; gap: .5rem; align-items: baseline; }
.detail-head h3 { margin: 0; font-size: 1rem; overflow-wrap: anywhere; }
.detail-head button { margin-left: auto; }
.detail h4 { margin: .9rem 0 .3rem; font-size: .9rem; color: var(--muted); font-weight: 600; }
.detail ol { margin: 0; padding-left: 1.2rem; }
.detail table { font-size: .92em; }
.problem-box { border-left: 3px solid var(--warn); padding: .3rem .6rem; margin: .5rem 0; }
.problem-box.invalid { border-color: var(--bad); }
pre.data { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 8rem; overflow: auto; font-size: .85em; }
`;

/*
 * Filters and paging are the API's: the page never holds more than one page of rows, so 100,000 schedules
 * cost what 50 do. The API pages by cursor (the last id of a page), so going back needs the cursors of the
 * pages before: a stack of them. Controls are built once and outlive every re-render, so typing in them
 * is never interrupted by a refresh.
 */
export const SCHEDULES_SCRIPT = `
  // ---- Runtime schedules ----
  function schedulesView(root) {
    const PAGE = ${SCHEDULES_PAGE_SIZE};
    const DEBOUNCE_MS = 300;
    // A filtered page reads on for this many answers at most: 5,000 ids each, a million in all.
    const FILL_REQUESTS = 200;
    const readOnly = root.dataset.readOnly === 'true';
    const count = new Intl.NumberFormat('en-US');
    const state = {
      search: '', job: '',
      // cursors[i] is where page i starts (undefined: the first page).
      cursors: [undefined], index: 0,
      page: null, pageText: '', error: null, seq: 0, loading: 0,
      selected: null, detail: null, detailText: '', detailError: null, detailSeq: 0, acting: false,
    };
    const PROBLEM_CLASS = { orphaned: 'warn', shadowed: 'warn', invalid: 'bad' };

    const search = h('input', { type: 'search', id: 'schedule-search', placeholder: 'id contains…', 'aria-label': 'Search schedules by id (contains)', autocomplete: 'off', spellcheck: 'false' });
    const job = h('input', { type: 'search', id: 'schedule-job', placeholder: 'job type', 'aria-label': 'Filter schedules by job type', list: 'schedule-job-types', autocomplete: 'off', spellcheck: 'false' });
    const jobTypes = h('datalist', { id: 'schedule-job-types' });
    const prev = h('button', { type: 'button', id: 'schedules-prev', disabled: '' }, '← Previous');
    const next = h('button', { type: 'button', id: 'schedules-next', disabled: '' }, 'Next →');
    const where = h('span', { id: 'schedules-where', 'aria-live': 'polite' });
    const heading = h('h2', { id: 'schedules-title' }, 'Schedules');
    const errorLine = h('p', { id: 'schedules-error', class: 'bad', role: 'alert', hidden: '' });
    const rows = h('div', { id: 'schedules-table', class: 'sched-table' }, h('p', { class: 'empty' }, 'Loading schedules…'));
    const detail = h('aside', { id: 'schedule-detail', class: 'card detail', hidden: '', 'aria-live': 'polite' });
    const layout = h('div', { class: 'sched-layout' }, rows, detail);
    root.replaceChildren(heading,
      h('div', { class: 'toolbar' }, search, job, jobTypes, h('div', { class: 'pager' }, prev, where, next)),
      errorLine, layout);

    function filtered() {
      return state.search !== '' || state.job !== '';
    }
    function zoned(isoText, zone) {
      try {
        const parts = {};
        // The offset, not an abbreviation: browsers know abbreviations only for some zones and locales.
        for (const part of new Intl.DateTimeFormat('en-GB', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit',
          hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'shortOffset' }).formatToParts(new Date(isoText))) {
          parts[part.type] = part.value;
        }
        return parts.year + '-' + parts.month + '-' + parts.day + ' ' + parts.hour + ':' + parts.minute +
          (parts.second === '00' ? '' : ':' + parts.second) + ' ' + parts.timeZoneName;
      } catch {
        return null; // a zone this browser does not know: the UTC time below still says it
      }
    }
    function problemBadge(problem) {
      return problem ? badge(problem.kind, PROBLEM_CLASS[problem.kind] || 'warn') : null;
    }
    function pausedCell(s) {
      if (!s.paused) return badge('active', 'ok');
      return [badge('paused', 'warn'),
        s.pauseNote ? h('span', { class: 'sub pause-note' }, s.pauseNote) : null,
        // A pause in the spec is not one that resume ends.
        s.spec.paused === true ? h('span', { class: 'sub' }, 'by its spec') : null];
    }
    function scheduleRow(s) {
      const row = h('tr', { class: 'schedule' + (s.problem ? ' problem problem-' + s.problem.kind : '') + (s.id === state.selected ? ' selected' : ''), 'data-schedule': s.id },
        h('td', {}, h('button', { type: 'button', class: 'link', 'aria-label': 'Open schedule ' + s.id }, s.id),
          s.spec.note ? h('span', { class: 'sub' }, s.spec.note) : null),
        h('td', {}, s.spec.job),
        h('td', {}, h('code', {}, s.trigger), h('span', { class: 'sub' }, s.spec.at !== undefined ? 'once' : s.spec.timezone || 'UTC')),
        h('td', {}, pausedCell(s)),
        h('td', { class: 'num' }, s.version),
        h('td', {}, time(s.updatedAt), h('span', { class: 'sub' }, 'by ' + s.updatedBy)),
        h('td', {}, s.problem ? [problemBadge(s.problem), h('span', { class: 'sub ' + (PROBLEM_CLASS[s.problem.kind] || 'warn') }, s.problem.detail)] : h('span', { class: 'empty' }, '—')));
      row.addEventListener('click', () => open(s.id));
      return row;
    }
    function emptyText() {
      if (!state.page) return 'Loading schedules…';
      if (state.page.total === 0) return 'No runtime schedules. Create one with leasebeat schedules upsert <id> or PUT /api/schedules/<id>.';
      if (state.index > 0) return 'No more schedules after the previous page.';
      const wanted = [state.search ? 'an id containing "' + state.search + '"' : null, state.job ? 'job type "' + state.job + '"' : null].filter(Boolean);
      return 'No schedule has ' + wanted.join(' and ') + '.';
    }
    function drawTable() {
      const list = state.page ? state.page.schedules : [];
      rows.replaceChildren(table(['Id', 'Job type', 'Trigger', 'Paused', 'Version', 'Updated', 'Problem'], list.map(scheduleRow), emptyText()));
      for (const s of list) offer(s.spec.job);
    }
    const offered = new Set();
    function offer(name) {
      if (offered.has(name)) return;
      offered.add(name);
      jobTypes.append(h('option', { value: name }));
    }
    function drawChrome() {
      rows.classList.toggle('loading', state.loading > 0);
      rows.setAttribute('aria-busy', state.loading > 0 ? 'true' : 'false');
      errorLine.hidden = state.error === null;
      errorLine.textContent = state.error === null ? '' : 'Schedules could not be read: ' + state.error;
      const page = state.page;
      heading.replaceChildren('Schedules' + (page ? ' (' + count.format(page.total) + ')' : ''),
        h('span', { class: 'hint' }, 'in id order · ' + PAGE + ' a page · click a row for its next ticks, runs and actions'));
      prev.disabled = state.index === 0;
      next.disabled = !page || page.cursor === undefined || page.cursor === null;
      if (!page) {
        where.textContent = '';
      } else {
        const first = state.index * PAGE + 1, shown = page.schedules.length;
        where.textContent = 'page ' + (state.index + 1) + (shown ? ' · ' + count.format(first) + '–' + count.format(first + shown - 1) : '') +
          // The API counts all schedules, not the matches: counting those would read every record.
          (filtered() ? ' of the matches' : ' of ' + count.format(page.total));
      }
    }

    function pageUrl(cursor, limit) {
      const params = new URLSearchParams({ limit: String(limit) });
      if (state.search) params.set('search', state.search);
      if (state.job) params.set('job', state.job);
      if (cursor !== undefined && cursor !== null) params.set('cursor', cursor);
      return '/api/schedules?' + params.toString();
    }
    async function load(quiet) {
      const seq = ++state.seq;
      state.loading++;
      if (!quiet) drawChrome();
      try {
        let page = await getJson(pageUrl(state.cursors[state.index], PAGE));
        // A filtered answer covers a bounded stretch of ids (the API's cap per request, so that no request
        // holds the leader): read on from its cursor until the page is full, the ids end, or FILL_REQUESTS.
        for (let requests = 1; filtered() && page.schedules.length < PAGE && page.cursor != null && requests < FILL_REQUESTS; requests++) {
          if (seq !== state.seq) return;
          const more = await getJson(pageUrl(page.cursor, PAGE - page.schedules.length));
          page = { ...more, schedules: page.schedules.concat(more.schedules) };
        }
        if (seq !== state.seq) return; // a newer request (another page, filter or refresh) answers instead
        state.error = null;
        const text = JSON.stringify(page);
        // Unchanged rows are left alone: no flicker, and a focused row keeps its focus.
        if (text !== state.pageText) {
          state.page = page;
          state.pageText = text;
          drawTable();
        }
      } catch (error) {
        if (seq !== state.seq) return;
        // The rows last read stay on screen, under the line that says what failed.
        state.error = error.message;
        if (!state.page) rows.replaceChildren(h('p', { class: 'empty' }, 'No schedules to show.'));
      } finally {
        state.loading--;
        drawChrome();
      }
    }
    function restart() {
      state.cursors = [undefined];
      state.index = 0;
      void load(false);
    }
    let debounce;
    function filterChanged(now) {
      clearTimeout(debounce);
      const apply = () => {
        const [s, j] = [search.value.trim(), job.value.trim()];
        if (s === state.search && j === state.job) return;
        state.search = s;
        state.job = j;
        restart();
      };
      if (now) apply();
      else debounce = setTimeout(apply, DEBOUNCE_MS);
    }
    for (const input of [search, job]) {
      input.addEventListener('input', () => filterChanged(false));
      input.addEventListener('keydown', (event) => { if (event.key === 'Enter') filterChanged(true); });
    }
    next.addEventListener('click', () => {
      if (!state.page || state.page.cursor == null) return;
      state.cursors = state.cursors.slice(0, state.index + 1).concat([state.page.cursor]);
      state.index++;
      void load(false);
    });
    prev.addEventListener('click', () => {
      if (state.index === 0) return;
      state.index--;
      void load(false);
    });

    // ---- The detail of one schedule ----
    const detailTitle = h('h3', { id: 'schedule-detail-title' });
    const closeButton = h('button', { type: 'button', 'aria-label': 'Close the detail' }, 'Close');
    const detailBody = h('div', { id: 'schedule-detail-body' });
    const note = h('input', { type: 'text', id: 'schedule-note', maxlength: '500', placeholder: 'why (shown with the pause)', 'aria-label': 'Pause note' });
    const pauseButton = h('button', { type: 'button', 'data-action': 'pause' }, 'Pause');
    const resumeButton = h('button', { type: 'button', 'data-action': 'resume' }, 'Resume');
    const triggerButton = h('button', { type: 'button', 'data-action': 'trigger' }, 'Trigger now');
    const actionResult = h('p', { id: 'schedule-action-result', class: 'action-result', role: 'status', hidden: '' });
    const actions = readOnly
      ? h('p', { class: 'note' }, 'This server is read-only (LEASEBEAT_BOARD_READONLY): pause, resume and trigger with leasebeat schedules.')
      : h('div', { class: 'actions', id: 'schedule-actions' }, note, pauseButton, resumeButton, triggerButton);
    detail.append(h('div', { class: 'detail-head' }, detailTitle, closeButton), detailBody, actions, actionResult);

    function runOutcome(run) {
      if (run.fate === 'skipped') return h('span', { class: 'muted' }, 'skipped' + (run.reason ? ' (' + run.reason + ')' : '') + (run.count > 1 ? ' × ' + run.count : ''));
      if (run.state === 'completed') return h('span', { class: 'ok' }, 'completed');
      if (run.state === 'failed') return h('span', { class: 'bad', title: run.error || '' }, 'failed' + (run.error ? ': ' + run.error : ''));
      if (run.state === 'unknown') return h('span', { class: 'muted' }, 'no longer in BullMQ');
      return h('span', {}, run.state || run.fate);
    }
    function runRow(run) {
      return h('tr', { class: 'run', 'data-kind': run.kind },
        h('td', {}, time(run.tick), run.kind === 'manual' ? h('span', { class: 'sub' }, 'manual run') : null),
        h('td', {}, runOutcome(run)),
        h('td', {}, run.jobId && run.queue ? h('a', { href: jobLink(run.queue, run.jobId) }, run.jobId) : run.jobId || h('span', { class: 'empty' }, '—')));
    }
    function drawDetail() {
      detail.hidden = state.selected === null;
      layout.classList.toggle('with-detail', state.selected !== null);
      for (const row of rows.querySelectorAll('tr.schedule')) row.classList.toggle('selected', row.dataset.schedule === state.selected);
      if (state.selected === null) return;
      detailTitle.textContent = state.selected;
      const d = state.detail;
      const skipped = d ? Object.entries(d.skipped) : [];
      resumeButton.disabled = state.acting || !d || !d.paused;
      pauseButton.disabled = triggerButton.disabled = state.acting || !d;
      detailBody.replaceChildren(...[
        state.detailError ? h('p', { class: 'bad', id: 'schedule-detail-error', role: 'alert' }, state.detailError) : null,
        !d ? (state.detailError ? null : h('p', { class: 'empty' }, 'Loading…')) : null,
        d && d.problem ? h('div', { class: 'problem-box ' + d.problem.kind, id: 'schedule-problem' }, problemBadge(d.problem), ' ', d.problem.detail) : null,
        d ? fields([
          ['Job type', d.spec.job],
          ['Trigger', h('code', {}, d.trigger)],
          ['Time zone', d.timezone],
          ['State', h('span', { id: 'schedule-state' }, pausedCell(d))],
          ['Version', h('span', {}, 'v' + d.version + ' · ', time(d.updatedAt), h('span', { class: 'sub' }, 'by ' + d.updatedBy))],
          d.createdAt ? ['Created', time(d.createdAt)] : null,
          d.spec.note ? ['Note', d.spec.note] : null,
          d.spec.data !== undefined ? ['Data', h('pre', { class: 'data' }, JSON.stringify(d.spec.data, null, 1))] : null,
          ['Enqueued', String(d.enqueued)],
          ['Skipped', h('span', { id: 'schedule-skipped' }, skipped.length ? skipped.map(([reason, n]) => reason + ' ' + n).join(', ') : 'none')],
        ].filter(Boolean)) : null,
        d ? h('h4', {}, 'Next ticks (' + d.timezone + ')') : null,
        d ? (d.next.length
          ? h('ol', { id: 'schedule-next' }, d.next.map((tick) => h('li', { 'data-tick': tick }, zoned(tick, d.timezone) || tick,
              h('span', { class: 'sub' }, tick.replace('T', ' ').replace(/\\.\\d+Z$/, 'Z') + ' · ' + relative(Date.parse(tick) - Date.now())))))
          : h('p', { class: 'empty', id: 'schedule-next' }, d.problem ? 'none: it does not run as written' : 'none: it has no tick left'))
          : null,
        d ? h('h4', {}, 'Last runs') : null,
        d ? h('div', { id: 'schedule-runs' }, table(['Tick', 'Outcome', 'Job'], d.runs.map(runRow), 'No run recorded yet.')) : null,
      ].filter(Boolean));
    }
    async function loadDetail() {
      const id = state.selected;
      if (id === null) return;
      const seq = ++state.detailSeq;
      try {
        const description = await getJson('/api/schedules/' + encodeURIComponent(id) + '/describe?ticks=5&runs=10');
        if (seq !== state.detailSeq) return;
        const text = JSON.stringify(description);
        if (text === state.detailText && state.detailError === null) return;
        state.detailError = null;
        state.detail = description;
        state.detailText = text;
      } catch (error) {
        if (seq !== state.detailSeq) return;
        state.detailError = error.message;
      }
      drawDetail();
    }
    function open(id) {
      if (state.selected !== id) {
        state.selected = id;
        state.detail = null;
        state.detailText = '';
        state.detailError = null;
        note.value = '';
        actionResult.hidden = true;
      }
      drawDetail();
      void loadDetail();
    }
    function close() {
      state.selected = null;
      state.detailSeq++;
      drawDetail();
    }
    closeButton.addEventListener('click', close);
    document.addEventListener('keydown', (event) => { if (event.key === 'Escape' && state.selected !== null) close(); });

    function said(action, result, paused) {
      if (action === 'pause') return note.value.trim() ? 'Paused, with the note shown above.' : 'Paused.';
      if (action === 'resume') return result.resumed ? 'Resumed.' : paused ? 'Not paused at run time: its spec says paused; write it without paused to resume it.' : 'It was not paused.';
      return ['Triggered: ', h('a', { href: jobLink(result.queue, result.jobId) }, result.jobId), ' in queue ' + result.queue + (result.flow ? ' (a flow)' : '')];
    }
    async function act(action) {
      const id = state.selected;
      if (id === null || state.acting) return;
      state.acting = true;
      drawDetail();
      const text = note.value.trim();
      try {
        // Through the page's own API routes: sendJson carries what their auth and origin checks need.
        const result = await sendJson('/api/schedules/' + encodeURIComponent(id) + '/' + action, action === 'pause' && text ? { note: text } : {});
        actionResult.replaceChildren(...[said(action, result, state.detail && state.detail.spec.paused === true)].flat());
        actionResult.className = 'action-result ok';
      } catch (error) {
        actionResult.textContent = action + ' failed: ' + error.message;
        actionResult.className = 'action-result bad';
      } finally {
        actionResult.hidden = false;
        state.acting = false;
        drawDetail();
      }
      await Promise.all([loadDetail(), load(true)]);
    }
    for (const button of [pauseButton, resumeButton, triggerButton]) button.addEventListener('click', () => void act(button.dataset.action));
    note.addEventListener('keydown', (event) => { if (event.key === 'Enter') void act('pause'); });

    void load(false);
    return {
      /** The 5 s refresh: the page on screen and the open detail, read again; skipped while a read is out. */
      refresh() {
        if (document.hidden) return;
        if (state.loading === 0) void load(true);
        if (state.selected !== null && !state.acting) void loadDetail();
      },
      /** Job types the status knows (definitions without a schedule), offered in the job filter. */
      offer(names) {
        for (const name of names) offer(name);
      },
    };
  }
`;
