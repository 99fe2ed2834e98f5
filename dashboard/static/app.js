// app.js — the xmod dashboard's main loop: signs in when the coordinator needs it (a login
// form; the session is an HttpOnly cookie), polls the coordinator's JSON API and renders the
// sweep list, the selected sweep's runs table and its loss curves against training FLOPs;
// fit.js renders the law fit and the recommendation form. The selected sweep lives in the
// URL hash (#sweep=ID). Metric series of ended runs are fetched once and cached.
'use strict';

const REFRESH_MS = 2000;
const RUN_STATES = ['QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'];
const ENDED = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const SERIES = ['val/loss', 'train/loss'];
const SERIES_TITLE = {
  'val/loss': 'Validation loss',
  'train/loss': 'Training loss'
};

const state = {
  sweepId: null,
  series: 'val/loss',
  runs: [],
  metrics: new Map(),  // run id -> {state, series: {name: [[flops, value], ...]}}
};

function sweepFromHash() {
  const match = /sweep=(\d+)/.exec(location.hash);
  return match ? Number(match[1]) : null;
}

function renderSweeps(sweeps) {
  const list = document.getElementById('sweep-list');
  list.replaceChildren();
  for (const sweep of sweeps) {
    const id = Number(sweep.id);
    const counts = sweep.runCounts;
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    const ended = ['SUCCEEDED', 'FAILED', 'CANCELLED'].reduce((a, s) => a + (counts[s] || 0), 0);
    const li = Xmod.node('li');
    li.dataset.sweepId = id;
    if (id === state.sweepId) li.classList.add('selected');
    const sweepState = sweep.state.replace('SWEEP_', '');
    li.append(
        Xmod.node('span', 'name', `#${id} ${sweep.name}`),
        Xmod.node('span', `badge ${sweepState}`, sweepState.toLowerCase()));
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
            'span', 'meta', `${ended}/${total} runs ended · ` + Xmod.time(sweep.createdUnixMs)));
    li.addEventListener('click', () => {
      location.hash = `sweep=${id}`;
    });
    list.appendChild(li);
  }
}

function renderSweepHeader(sweep) {
  document.getElementById('sweep-title').textContent = `Sweep #${sweep.id} — ${sweep.name}`;
  const training = sweep.spec.training;
  document.getElementById('sweep-desc').textContent = [
    sweep.spec.description,
    `default budget ${Xmod.flops(training.flopBudget)} FLOPs`,
    `${training.batchTokens} tokens/step`,
    `created ${Xmod.time(sweep.createdUnixMs)}`,
  ].filter(Boolean).join(' · ');
  const chips = document.getElementById('sweep-counts');
  chips.replaceChildren();
  for (const s of RUN_STATES) {
    if (sweep.runCounts[s])
      chips.appendChild(Xmod.node('span', `state ${s}`, `${s}: ${sweep.runCounts[s]}`));
  }
}

// φ/φ_D (paper Table 1): forward FLOPs per token over the Dense run's at the same backbone
// and L in this sweep; undefined without such a Dense run.
function phiRatio(run, runs) {
  const key = r => `${r.spec.model.backbone.name}|${r.spec.training.seqLen}`;
  const dense = runs.find(r => r.spec.model.arch === 'DENSE' && key(r) === key(run));
  return dense && dense.forwardFlopsPerToken ?
      run.forwardFlopsPerToken / dense.forwardFlopsPerToken :
      undefined;
}

// The last value of a cached series, else `fallback` (the run's live progress).
function lastValue(runId, name, fallback) {
  const points = state.metrics.get(runId)?.series[name];
  return points && points.length ? points[points.length - 1][1] : fallback || undefined;
}

function renderRuns(runs) {
  const body = document.querySelector('#runs tbody');
  body.replaceChildren();
  for (const run of runs) {
    const id = Number(run.id);
    const model = run.spec.model;
    const progress = run.progress;
    const tr = Xmod.node('tr');
    tr.dataset.runId = id;
    Xmod.cell(tr, id, 'num');
    const name = Xmod.cell(tr, run.name);
    if (run.error) name.appendChild(Xmod.node('div', 'error', run.error));
    Xmod.cell(tr, model.arch.toLowerCase());
    Xmod.cell(tr, model.arch === 'DENSE' ? '' : model.k, 'num');
    Xmod.cell(tr, model.arch === 'DENSE' ? '' : model.a, 'num');
    Xmod.cell(tr, run.spec.training.seqLen, 'num');
    Xmod.cell(tr, Xmod.count(run.totalParams), 'num');
    const phi = phiRatio(run, runs);
    Xmod.cell(tr, phi === undefined ? '' : phi.toFixed(3), 'num');
    Xmod.cell(tr, run.state, `state ${run.state}`).title =
        `attempt ${run.attempts}/${run.maxAttempts}` + (run.worker ? ` on ${run.worker}` : '');
    const budget = progress.flopBudget || run.spec.training.flopBudget;
    const pct = budget ? Math.min(100, 100 * progress.flops / budget) : 0;
    const bar = Xmod.node('div', `bar ${run.state}`);
    bar.appendChild(Xmod.node('div')).style.width = `${pct}%`;
    const progressCell = Xmod.cell(tr, '');
    const wrap = progressCell.appendChild(Xmod.node('div', 'progress'));
    wrap.append(bar, Xmod.node('span', 'pct', `${pct.toFixed(0)}%`));
    progressCell.title = `${Xmod.flops(progress.flops)} / ${Xmod.flops(budget)} FLOPs, ` +
        `step ${progress.step}, ${Xmod.count(progress.tokens)} tokens`;
    Xmod.cell(tr, Xmod.loss(lastValue(id, 'train/loss', progress.trainLoss)), 'num');
    Xmod.cell(tr, Xmod.loss(lastValue(id, 'val/loss', progress.valLoss)), 'num');
    Xmod.cell(tr, progress.tokensPerSecond ? progress.tokensPerSecond.toFixed(0) : '', 'num');
    body.appendChild(tr);
  }
}

// Fetches the loss series of runs that may have new points: not cached yet, still going,
// or whose state changed since they were fetched.
async function fetchMetrics(runs) {
  const stale = runs.filter(run => {
    if (run.state === 'QUEUED' && Number(run.progress.step) === 0) return false;
    const cached = state.metrics.get(Number(run.id));
    return !cached || cached.state !== run.state || !ENDED.has(run.state);
  });
  await Promise.all(stale.map(async run => {
    const id = Number(run.id);
    const url = `/api/runs/${id}/metrics?names=${SERIES.join(',')}&max_points=400`;
    const data = await Xmod.api(url);
    const series = {};
    for (const s of (data ? data.series : [])) {
      series[s.name] = s.points.map(p => [p.flops, p.value]);
    }
    state.metrics.set(id, {state: run.state, series});
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
    state.sweepId = sweepFromHash() ?? (sweeps.length ? Number(sweeps[0].id) : null);
    renderSweeps(sweeps);
    const sweep = sweeps.find(s => Number(s.id) === state.sweepId);
    document.getElementById('empty').hidden = !!sweep;
    document.getElementById('sweep-view').hidden = !sweep;
    if (sweep) {
      renderSweepHeader(sweep);
      const runs = (await Xmod.api(`/api/sweeps/${sweep.id}/runs`))?.runs || [];
      state.runs = runs;
      await fetchMetrics(runs);
      renderRuns(runs);
      renderCurves();
      await XmodFit.update(sweep, runs);
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.classList.remove('failing');
    document.body.dataset.loaded = 'true';
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
document.getElementById('logout').addEventListener('click', async () => {
  await Xmod.logout();
  showLogin();
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
  if (input.checked) state.series = input.value;
  input.addEventListener('change', () => {
    state.series = input.value;
    renderCurves();
  });
}
window.addEventListener('hashchange', () => {
  state.metrics.clear();  // only the selected sweep's runs are kept
  (inFlight || Promise.resolve()).then(refreshOnce);
});
start();
