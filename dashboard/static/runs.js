// runs.js — the runs table's query at any sweep size: one page at a time from the server
// (GET /api/sweeps/{id}/runs with filters, sort, page_size, page_token; keyset pages, so a
// page stays whole while runs change), replicate grouping (group=replicates: one row a
// configuration with mean ± sd, n; expandable to its seeds) and live updates from the sweep's
// server-sent events (/api/sweeps/{id}/events, fed by the coordinator's change feed): the
// first page is fetched once, then changed runs are patched into the rows shown; only when a
// change may move rows (a run not on the page changed, or the server says "reload") is the
// current page — never the whole sweep — read again, at most once each RELOAD_MS.
// The rendering is app.js's: XmodRuns calls hooks.render(view) with what to show.
'use strict';

const XmodRuns = (() => {
  const PAGE_SIZE = 100;
  const RELOAD_MS = 5000;
  const FILTERS = ['state', 'arch', 'k', 'a', 'seq_len', 'backbone', 'label', 'name'];

  const q = {sweepId: null, sort: 'id', order: 'asc', group: false, filters: {}};
  let tokens = [''];  // page_token of each page reached so far; tokens[page] is this one's
  let page = 0;
  let response = null;  // the current page (ListRunsResponse)
  let source = null;    // the EventSource of q.sweepId
  let greeted = false;  // the stream's first hello needs no reload: the page was just read
  let reloadTimer = null;
  let lastLoad = 0;
  let loading = null;
  const expanded = new Map();   // group key -> its runs, while shown
  const seedCache = new Map();  // group key -> its runs, fetched for this page
  let hooks = {render: () => {}, counts: () => {}};

  function params(extra) {
    const p = new URLSearchParams();
    if (q.sort !== 'id') p.set('sort', q.sort);
    if (q.order === 'desc') p.set('order', 'desc');
    for (const name of FILTERS) {
      const value = (q.filters[name] || '').trim();
      if (value) p.set(name, value);
    }
    if (q.group) p.set('group', 'replicates');
    p.set('page_size', PAGE_SIZE);
    for (const [k, v] of Object.entries(extra || {})) p.set(k, v);
    return p;
  }

  // Reads the current page and renders it.
  async function load() {
    if (loading) return loading;
    const sweepId = q.sweepId;
    const path = `/api/sweeps/${sweepId}/runs?${params({page_token: tokens[page]})}`;
    loading = Xmod.api(path).then(async body => {
      if (sweepId !== q.sweepId) return;
      response = body || {runs: [], groups: [], total_size: 0, next_page_token: ''};
      seedCache.clear();
      lastLoad = Date.now();
      await hooks.render(view());
    }).finally(() => {
      loading = null;
    });
    return loading;
  }

  // A reload of the current page, at most once each RELOAD_MS.
  function reloadSoon() {
    if (reloadTimer) return;
    const wait = Math.max(0, lastLoad + RELOAD_MS - Date.now());
    reloadTimer = setTimeout(() => {
      reloadTimer = null;
      load();
    }, wait);
  }

  // What app.js renders: the page's runs or groups, where the page is, and the query.
  function view() {
    return {
      sweepId: q.sweepId,
      grouped: q.group,
      runs: response.runs || [],
      groups: response.groups || [],
      expanded,
      total: Number(response.total_size || 0),
      page,
      pageSize: PAGE_SIZE,
      hasNext: !!response.next_page_token,
      sort: q.sort,
      order: q.order,
    };
  }

  // Patches changed runs into the rows shown; a change elsewhere may move rows: reload.
  function applyChanges(runs) {
    if (!response) return;
    const shown = new Map((response.runs || []).map((r, i) => [r.id, i]));
    let elsewhere = false;
    const patched = [];
    for (const run of runs) {
      if (q.group) {
        elsewhere = true;  // a group's statistics are the server's to recompute
      } else if (shown.has(run.id)) {
        response.runs[shown.get(run.id)] = run;
        patched.push(run);
      } else {
        elsewhere = true;
      }
    }
    if (patched.length) hooks.patch(patched);
    // Sorting by a value that changes (state, loss) or filtering by one may move rows.
    if (elsewhere || ['state', 'val_loss'].includes(q.sort) || q.filters.state) reloadSoon();
  }

  function listen(sweepId) {
    if (source) source.close();
    greeted = false;
    source = new EventSource(`/api/sweeps/${sweepId}/events`);
    source.addEventListener('hello', event => {
      hooks.counts(JSON.parse(event.data).sweep);
      if (greeted) reloadSoon();  // a reconnect: changes may have been missed
      greeted = true;
    });
    source.addEventListener('runs', event => {
      const data = JSON.parse(event.data);
      hooks.counts(data.sweep);
      applyChanges(data.runs || []);
    });
    source.addEventListener('reload', event => {
      hooks.counts(JSON.parse(event.data).sweep);
      reloadSoon();
    });
  }

  // Shows sweep `sweepId`: on a change of sweep, the first page of a fresh query and a new
  // event stream; otherwise nothing (the stream keeps the page current).
  function show(sweepId) {
    if (sweepId === q.sweepId) return Promise.resolve();
    q.sweepId = sweepId;
    tokens = [''];
    page = 0;
    response = null;
    expanded.clear();
    listen(sweepId);
    return load();
  }

  function requery(change) {
    change();
    tokens = [''];
    page = 0;
    expanded.clear();
    return load();
  }

  // Column header clicks: sort by that key; again: reverse.
  const sortBy = key => requery(() => {
    q.order = q.sort === key && q.order === 'asc' ? 'desc' : 'asc';
    q.sort = key;
  });
  const filter = (name, value) => requery(() => {
    q.filters[name] = value;
  });
  const group = on => requery(() => {
    q.group = on;
  });

  function next() {
    if (!response || !response.next_page_token) return Promise.resolve();
    tokens[page + 1] = response.next_page_token;
    page += 1;
    return load();
  }
  function previous() {
    if (page === 0) return Promise.resolve();
    page -= 1;
    return load();
  }

  // The seeds of a group: every run of its configuration that passes the filters, fetched
  // once (one request of at most 1000 runs: the spec's limit of seeds).
  async function seeds(groupEntry) {
    if (seedCache.has(groupEntry.key)) return seedCache.get(groupEntry.key);
    const p = params({name: `${groupEntry.name}-s`, page_size: 1000, page_token: ''});
    for (const name of ['group', 'sort', 'order']) p.delete(name);
    const ids = new Set(groupEntry.run_ids);
    const body = await Xmod.api(`/api/sweeps/${groupEntry.first.sweep_id}/runs?${p}`);
    const runs = (body?.runs || []).filter(r => ids.has(r.id));
    seedCache.set(groupEntry.key, runs);
    return runs;
  }

  // Shows or hides a group's seeds under its row.
  async function toggle(groupEntry) {
    if (expanded.has(groupEntry.key)) {
      expanded.delete(groupEntry.key);
    } else {
      expanded.set(groupEntry.key, await seeds(groupEntry));
    }
    await hooks.render(view());
  }

  function init(renderHooks) {
    hooks = renderHooks;
  }

  // Reads the current page again now (after a change made from the page).
  function reload() {
    return q.sweepId === null ? Promise.resolve() : load();
  }

  // Ends the event stream and any pending reload (before signing out); resolves once a page
  // being read has arrived.
  function stop() {
    if (source) source.close();
    source = null;
    clearTimeout(reloadTimer);
    reloadTimer = null;
    return loading || Promise.resolve();
  }

  return {init, show, reload, stop, sortBy, filter, group, next, previous, toggle, seeds,
          FILTERS};
})();
