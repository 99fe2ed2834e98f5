// app.js — the xmod dashboard's main loop: signs in when the coordinator needs it (a login
// form; the session is an HttpOnly cookie), polls the coordinator's small documents (sweeps,
// studies) and renders the sweep list, one page of the selected sweep's runs table (rows.js
// builds its rows; runs.js pages, sorts, filters and groups it on the server and keeps it
// current from the sweep's event stream) and the page's loss curves against training FLOPs;
// compare.js overlays picked runs or configurations; fit.js renders the law fit and the
// recommendation form. The
// selected sweep lives in the URL hash (#sweep=ID), a selected study (one fit over several
// sweeps: its members and its fit) likewise (#study=NAME). Metric series of ended runs are
// fetched once and cached.
'use strict';

// The sweep and study lists' poll; the selected sweep's runs and counts come from its event
// stream.
const REFRESH_MS = 5000;
const CURVE_MS = 2000;  // a training run's curve is read again at most this often
const RUN_STATES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];
const ENDED = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
// Series names come from the coordinator's one definition (/series.js: XmodSeries).
const SERIES = [XmodSeries.VAL_LOSS, XmodSeries.TRAIN_LOSS];
const SERIES_TITLE = {
  [XmodSeries.VAL_LOSS]: 'Validation loss',
  [XmodSeries.TRAIN_LOSS]: 'Training loss'
};

const state = {
  sweepId: null,
  series: XmodSeries.VAL_LOSS,
  runs: [],
  metrics: new Map(),  // run id -> {state, series: {name: [[flops, value], ...]}}
};

function sweepFromHash() {
  const match = /sweep=(\d+)/.exec(location.hash);
  return match ? Number(match[1]) : null;
}

function studyFromHash() {
  const match = /study=([A-Za-z0-9_.-]+)/.exec(location.hash);
  return match ? match[1] : null;
}

function renderStudies(studies, selected) {
  const list = document.getElementById('study-list');
  list.replaceChildren();
  for (const study of studies) {
    const name = study.spec.name;
    const li = Xmod.node('li');
    li.dataset.study = name;
    if (name === selected) li.classList.add('selected');
    const roles = study.spec.members.map(m => `${m.role} #${m.sweep_id}`).join(', ');
    li.append(Xmod.node('span', 'name', name), Xmod.node('span', 'meta', roles));
    li.addEventListener('click', () => {
      location.hash = `study=${name}`;
    });
    list.appendChild(li);
  }
}

// The selected study: its member sweeps and its fit (none yet until member runs succeed).
async function renderStudy(study) {
  document.getElementById('study-title').textContent = `Study ${study.spec.name}`;
  document.getElementById('study-desc').textContent = [
    study.spec.description,
    `created ${Xmod.time(study.created_unix_ms)}`,
  ].filter(Boolean).join(' · ');
  const body = document.querySelector('#study-members tbody');
  body.replaceChildren();
  for (const member of study.spec.members) {
    const tr = body.appendChild(Xmod.node('tr'));
    Xmod.cell(tr, member.sweep_id, 'num');
    Xmod.cell(tr, member.sweep_name);
    Xmod.cell(tr, member.role);
  }
  let why = '';
  const fit = await Xmod.api(`/api/studies/${study.spec.name}/fit`, message => {
    why = message;
  });
  XmodFit.renderStudyFit(document.getElementById('study-fit'), fit, why);
}

function renderSweeps(sweeps) {
  const list = document.getElementById('sweep-list');
  list.replaceChildren();
  for (const sweep of sweeps) {
    const id = Number(sweep.id);
    const counts = sweep.run_counts;
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const ended = ['SUCCEEDED', 'FAILED', 'CANCELLED'].reduce((a, s) => a + (counts[s] || 0), 0);
    const li = Xmod.node('li');
    li.dataset.sweepId = id;
    if (id === state.sweepId) li.classList.add('selected');
    const sweepState = sweep.state.replace('SWEEP_', '');
    // The badge floats right: first, so that it stays on the name's first line.
    li.append(
        Xmod.node('span', `badge ${sweepState}`, sweepState.toLowerCase()),
        Xmod.node('span', 'name', `#${id} ${sweep.name}`));
    const bar = Xmod.node('div', 'stack');
    for (const s of RUN_STATES) {
      if (!counts[s]) continue;
      const part = Xmod.node('div', s);
      part.style.width = `${100 * counts[s] / total}%`;
      bar.appendChild(part);
    }
    li.append(
        bar,
        Xmod.node(
            'span', 'meta', `${ended}/${total} runs ended · ` + Xmod.time(sweep.created_unix_ms)));
    li.addEventListener('click', () => {
      location.hash = `sweep=${id}`;
    });
    list.appendChild(li);
  }
}

function renderSweepHeader(sweep) {
  document.getElementById('sweep-title').textContent = `Sweep #${sweep.id} — ${sweep.name}`;
  const training = sweep.spec.training || {};
  document.getElementById('sweep-desc').textContent = [
    sweep.spec.description,
    budgetText(sweep.spec),
    `${training.batch_tokens} tokens/step`,
    `created ${Xmod.time(sweep.created_unix_ms)}`,
  ].filter(Boolean).join(' · ');
  renderCounts(sweep);
}

function renderCounts(sweep) {
  const chips = document.getElementById('sweep-counts');
  chips.replaceChildren();
  for (const s of RUN_STATES) {
    if (sweep.run_counts[s])
      chips.appendChild(Xmod.node('span', `state ${s}`, `${s}: ${sweep.run_counts[s]}`));
  }
}

// The sweep's training-FLOP budget: training.flop_budget, else the grids' own
// flop_budgets (paper sweeps set them per grid).
function budgetText(spec) {
  const budget = Number(spec.training?.flop_budget);
  if (budget) return `default budget ${Xmod.flops(budget)} FLOPs`;
  const perGrid = [...new Set((spec.grids || []).flatMap(g => g.flop_budgets || []).map(Number))]
                      .filter(Boolean)
                      .sort((a, b) => a - b);
  if (!perGrid.length) return '';
  return `budget${perGrid.length > 1 ? 's' : ''} ${perGrid.map(Xmod.flops).join(', ')} FLOPs`;
}

// The last value of a cached series, else `fallback` (the run's live progress).
function lastValue(runId, name, fallback) {
  const points = state.metrics.get(runId)?.series[name];
  return points && points.length ? points[points.length - 1][1] : fallback || undefined;
}

function renderTable(view) {
  const body = document.querySelector('#runs tbody');
  const rows = [];
  if (view.grouped) {
    for (const group of view.groups) {
      const seeds = view.expanded.get(group.key);
      rows.push(XmodRows.groupRow(group, !!seeds));
      for (const run of seeds || []) rows.push(XmodRows.runRow(run, state.runs, group));
    }
  } else {
    for (const run of view.runs) rows.push(XmodRows.runRow(run, view.runs));
  }
  body.replaceChildren(...rows);
  for (const th of document.querySelectorAll('#runs th[data-sort]')) {
    th.classList.toggle('sorted', th.dataset.sort === view.sort);
    th.dataset.order = th.dataset.sort === view.sort ? view.order : '';
  }
  const shown = view.grouped ? view.groups.length : view.runs.length;
  const from = view.page * view.pageSize;
  document.getElementById('runs-page').textContent = shown ?
      `${from + 1}–${from + shown} of ${view.total} ${view.grouped ? 'configurations' : 'runs'}` :
      `none of ${view.total}`;
  document.getElementById('runs-prev').disabled = view.page === 0;
  document.getElementById('runs-next').disabled = !view.hasNext;
}

// A page arrived (or a group opened): its runs' curves, the table and the chart.
async function renderPage(view) {
  state.runs = view.grouped ?
      view.groups.map(g => g.first).concat([...view.expanded.values()].flat()) :
      view.runs;
  await fetchMetrics(state.runs);
  renderTable(view);
  renderCurves();
  performance.mark('xmod-runs-rendered');
  // Tests wait on it: which page of which query is on screen.
  document.body.dataset.runsPage = `${view.sweepId}:${view.page}:${view.sort}:${view.order}:` +
      `${view.grouped ? 'groups' : 'runs'}:${view.grouped ? view.groups.length : view.runs.length}`;
}

// Runs that changed (the event stream) replace their rows; their curves are read again.
async function patchRuns(runs) {
  await fetchMetrics(runs);
  for (const run of runs) {
    const row = document.querySelector(`#runs tr[data-run-id="${Number(run.id)}"]`);
    if (row) row.replaceWith(XmodRows.runRow(run, state.runs));
  }
  state.runs = state.runs.map(r => runs.find(c => c.id === r.id) || r);
  renderCurves();
  XmodCompare.render();
}

// Fetches the loss series of runs that may have new points: not cached yet, still going
// (at most each CURVE_MS), or whose state changed since they were fetched. A run that never
// took a step (queued, or cancelled or failed before training) has none: a cancelled paper
// sweep has hundreds.
async function fetchMetrics(runs) {
  const stale = runs.filter(run => {
    if (run.state !== 'RUNNING' && Number(run.progress.step) === 0) return false;
    const cached = state.metrics.get(Number(run.id));
    if (!cached || cached.state !== run.state) return true;
    // A training run's curve grows: read again, but not more often than each CURVE_MS.
    return !ENDED.has(run.state) && Date.now() - cached.at >= CURVE_MS;
  });
  await Promise.all(stale.map(async run => {
    const id = Number(run.id);
    const names = SERIES.concat(XmodRows.evalSeries(run));
    const url = `/api/runs/${id}/metrics?names=${names.join(',')}&max_points=400`;
    const data = await Xmod.api(url);
    const series = {};
    for (const s of (data ? data.series : [])) {
      series[s.name] = s.points.map(p => [p.flops, p.value]);
    }
    state.metrics.set(id, {state: run.state, series, at: Date.now()});
  }));
}

function renderCurves() {
  const svg = document.getElementById('curves');
  const series = state.runs.map(run => {
    const cached = state.metrics.get(Number(run.id));
    return {label: run.name, points: cached?.series[state.series] || []};
  });
  svg.dataset.series = state.series;
  document.getElementById('curves-title').textContent =
      `${SERIES_TITLE[state.series]} vs training FLOPs`;
  XmodChart.draw(svg, series, `${state.series} (nats)`);
  const legend = document.getElementById('legend');
  legend.replaceChildren();
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const item = Xmod.node('span');
    item.appendChild(Xmod.node('i')).style.background = XmodChart.colour(i);
    item.append(`${s.label} `, Xmod.node('b', '', Xmod.loss(s.points[s.points.length - 1][1])));
    legend.appendChild(item);
  });
}

async function refresh() {
  const status = document.getElementById('status');
  try {
    const sweeps = (await Xmod.api('/api/sweeps'))?.sweeps || [];
    const studies = (await Xmod.api('/api/studies'))?.studies || [];
    const studyName = studyFromHash();
    const study = studies.find(s => s.spec.name === studyName);
    state.sweepId = study ? null : sweepFromHash() ?? (sweeps.length ? Number(sweeps[0].id) : null);
    renderSweeps(sweeps);
    renderStudies(studies, study ? studyName : null);
    const sweep = sweeps.find(s => Number(s.id) === state.sweepId);
    document.getElementById('empty').hidden = !!sweep || !!study;
    document.getElementById('sweep-view').hidden = !sweep;
    document.getElementById('study-view').hidden = !study;
    if (study) await renderStudy(study);
    if (sweep) {
      renderSweepHeader(sweep);
      XmodActions.renderSweep(sweep);
      await XmodRuns.show(Number(sweep.id));
      renderCurves();  // the page's cached series: cheap, and new points of running runs
      await XmodFit.update(sweep, state.runs);
      await XmodDesign.update(sweep);
      await XmodActions.renderHistory(Number(sweep.id));
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove('failing');
    document.body.dataset.loaded = 'true';
    // What the page now shows ("sweep=ID", "study=NAME", "" for none): tests wait on it.
    document.body.dataset.view = study ? `study=${studyName}` : sweep ? `sweep=${sweep.id}` : '';
  } catch (error) {
    if (error.unauthenticated) {
      showLogin('your session ended; sign in again');
      return;
    }
    status.textContent = `error: ${error.message}`;
    status.classList.add('failing');
  }
}

// The login form replaces the page until a login succeeds; the token is only in the form
// field, which is cleared once sent.
let loggedIn = false;
function showLogin(message) {
  loggedIn = false;
  document.getElementById('app').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('login-error').textContent = message || '';
  document.getElementById('status').textContent = 'signed out';
}
function showApp(session) {
  loggedIn = true;
  XmodActions.setSession(session);
  document.getElementById('login').hidden = true;
  document.getElementById('app').hidden = false;
  document.getElementById('logout').hidden = !session.required;
}
document.getElementById('login').addEventListener('submit', async event => {
  event.preventDefault();
  const field = event.target.elements.token;
  const refused = await Xmod.login(field.value);
  field.value = '';
  if (refused) {
    document.getElementById('login-error').textContent = refused;
    return;
  }
  await start();
});
// Signing out starts the page afresh: nothing of the session (its streams, its polling, the
// buttons its scope allowed) outlives it, and the next sign-in may be another credential's.
// The page asks nothing more of the session before it ends (else the requests still going
// would meet a 401).
document.getElementById('logout').addEventListener('click', async () => {
  loggedIn = false;  // the polling loop stops
  await XmodRuns.stop();
  await (inFlight || Promise.resolve()).catch(() => {});
  await Xmod.logout();
  location.reload();
});

// One refresh at a time: the loop's next one starts REFRESH_MS after the previous ended;
// a sweep selection refreshes at once (after the one in flight, if any).
let inFlight = null;
function refreshOnce() {
  if (inFlight) return inFlight;
  inFlight = refresh().finally(() => {
    inFlight = null;
  });
  return inFlight;
}
async function loop() {
  if (!loggedIn) return;  // a later login starts it again
  await refreshOnce();
  setTimeout(loop, REFRESH_MS);
}

// Shows the dashboard when this browser has a session (or none is needed), else the login.
async function start() {
  const session = await Xmod.session();
  if (session.required && !session.authenticated) {
    showLogin();
    return;
  }
  const wasLoggedIn = loggedIn;
  showApp(session);
  if (!wasLoggedIn) loop();
}

for (const input of document.querySelectorAll('input[name=series]')) {
  input.value = XmodSeries[input.dataset.series];
  input.parentElement.querySelector('.series-name').textContent = input.value;
  if (input.checked) state.series = input.value;
  input.addEventListener('change', () => {
    state.series = input.value;
    renderCurves();
  });
}
XmodRows.init({lastValue});
// A change made from the page shows at once: the runs' page and the sweep are read again.
XmodActions.init({changed: () => XmodRuns.reload().then(refreshOnce)});
XmodRuns.init({render: renderPage, patch: patchRuns, counts: renderCounts});
for (const th of document.querySelectorAll('#runs th[data-sort]')) {
  th.addEventListener('click', () => XmodRuns.sortBy(th.dataset.sort));
}
// Filters apply as typed, once typing pauses.
for (const input of document.querySelectorAll('#run-filters input[data-filter]')) {
  let timer = null;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => XmodRuns.filter(input.dataset.filter, input.value), 300);
  });
}
document.getElementById('group-replicates')
    .addEventListener('change', event => XmodRuns.group(event.target.checked));
document.getElementById('runs-next').addEventListener('click', () => XmodRuns.next());
document.getElementById('runs-prev').addEventListener('click', () => XmodRuns.previous());
window.addEventListener('hashchange', () => {
  state.metrics.clear();  // only the selected sweep's runs are kept
  (inFlight || Promise.resolve()).then(refreshOnce);
});
start();
