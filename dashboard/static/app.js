// app.js — the xmod dashboard: polls the coordinator's JSON API (/api/...) and renders the
// sweep list, the runs of the selected sweep, their loss curves against training FLOPs and
// the sweep's scaling-law fit. Proto JSON may use snake_case or lowerCamelCase names; `f`
// reads either.
'use strict';

const REFRESH_MS = 2000;
const state = {sweepId: null, series: 'val/loss'};

function f(obj, name) {
  if (!obj) return undefined;
  if (name in obj) return obj[name];
  const camel = name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  return obj[camel];
}
const num = v => (v === undefined || v === null || v === '') ? 0 : Number(v);

async function api(path) {
  const response = await fetch(path, {cache: 'no-store'});
  if (response.status === 404) return null;
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function fmtParams(n) {
  if (!n) return '';
  if (n >= 1e9) return (n / 1e9).toFixed(2) + 'B';
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  return (n / 1e3).toFixed(0) + 'K';
}
const fmtLoss = v => v ? Number(v).toFixed(4) : '';

function cell(row, text, cls) {
  const td = document.createElement('td');
  if (cls) td.className = cls;
  td.textContent = text;
  row.appendChild(td);
  return td;
}

function renderSweeps(sweeps) {
  const list = document.getElementById('sweep-list');
  list.replaceChildren();
  for (const sweep of sweeps) {
    const id = num(f(sweep, 'id'));
    const li = document.createElement('li');
    li.dataset.sweepId = id;
    if (id === state.sweepId) li.classList.add('selected');
    const counts = f(sweep, 'run_counts') || {};
    const total = Object.values(counts).reduce((a, b) => a + num(b), 0);
    li.innerHTML = '';
    li.appendChild(document.createTextNode(`#${id} ${f(sweep, 'name') || ''}`));
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = `${(f(sweep, 'state') || '').replace('SWEEP_', '')} · ${total} runs`;
    li.appendChild(meta);
    li.addEventListener('click', () => { state.sweepId = id; refresh(); });
    list.appendChild(li);
  }
}

function renderRuns(runs) {
  const body = document.querySelector('#runs tbody');
  body.replaceChildren();
  for (const run of runs) {
    const spec = f(run, 'spec') || {};
    const model = f(spec, 'model') || {};
    const training = f(spec, 'training') || {};
    const progress = f(run, 'progress') || {};
    const tr = document.createElement('tr');
    tr.dataset.runId = num(f(run, 'id'));
    cell(tr, num(f(run, 'id')));
    cell(tr, f(run, 'name') || '');
    cell(tr, (f(model, 'arch') || 'DENSE'));
    cell(tr, num(f(model, 'k')) || 1, 'num');
    cell(tr, num(f(model, 'a')) || '', 'num');
    cell(tr, num(f(training, 'seq_len')), 'num');
    cell(tr, fmtParams(num(f(run, 'total_params'))), 'num');
    const runState = f(run, 'state') || 'QUEUED';
    cell(tr, runState, `state ${runState}`);
    const budget = num(f(progress, 'flop_budget')) || num(f(training, 'flop_budget'));
    const done = num(f(progress, 'flops'));
    const bar = document.createElement('div');
    bar.className = 'bar';
    const fill = document.createElement('div');
    fill.style.width = `${budget ? Math.min(100, 100 * done / budget) : 0}%`;
    bar.appendChild(fill);
    cell(tr, '').appendChild(bar);
    cell(tr, fmtLoss(f(progress, 'train_loss')), 'num');
    cell(tr, fmtLoss(f(progress, 'val_loss')), 'num');
    cell(tr, num(f(progress, 'tokens_per_second')).toFixed(0), 'num');
    body.appendChild(tr);
  }
}

async function renderCurves(runs) {
  const series = [];
  for (const run of runs) {
    const id = num(f(run, 'id'));
    const data = await api(`/api/runs/${id}/metrics?names=${encodeURIComponent(state.series)}` +
                           `&max_points=400`);
    const found = ((data && f(data, 'series')) || []).find(s => f(s, 'name') === state.series);
    const points = found ? (f(found, 'points') || []).map(p => [num(f(p, 'flops')),
                                                                num(f(p, 'value'))]) : [];
    series.push({label: f(run, 'name') || `run ${id}`, points});
  }
  const colours = XmodChart.draw(document.getElementById('curves'), series);
  const legend = document.getElementById('legend');
  legend.replaceChildren();
  series.forEach((s, i) => {
    if (!s.points.length) return;
    const item = document.createElement('span');
    item.innerHTML = `<i style="background:${colours[i]}"></i>`;
    item.appendChild(document.createTextNode(s.label));
    legend.appendChild(item);
  });
}

function renderFit(fit) {
  const box = document.getElementById('fit');
  if (!fit) { box.textContent = 'No fit yet.'; return; }
  if (f(fit, 'error')) { box.textContent = `Latest fit failed: ${f(fit, 'error')}`; return; }
  const params = f(fit, 'params') || {};
  const names = ['e', 'u', 'eta_n', 'rho_n', 'w', 'eta_l', 'rho_l', 'z', 'rho_k', 'rho_a'];
  const table = document.createElement('table');
  table.innerHTML = '<tr><th>parameter</th><th>estimate</th></tr>';
  for (const name of names) {
    const tr = document.createElement('tr');
    cell(tr, name);
    cell(tr, num(f(params, name)).toPrecision(5), 'num');
    table.appendChild(tr);
  }
  const summary = document.createElement('p');
  summary.textContent = `R²Δ = ${num(f(fit, 'r2')).toFixed(4)}, RMSE = ` +
      `${num(f(fit, 'rmse')).toFixed(4)}, MAE = ${num(f(fit, 'mae')).toFixed(4)}, ` +
      `${num(f(fit, 'n_obs'))} observations`;
  const cv = (f(fit, 'cv') || []).map(g => `${f(g, 'group')}: ${num(f(g, 'rmse')).toFixed(4)}`);
  const cvLine = document.createElement('p');
  cvLine.textContent = cv.length ? `Held-out group RMSE — ${cv.join(', ')}` : '';
  box.replaceChildren(summary, table, cvLine);
}

async function refresh() {
  const status = document.getElementById('status');
  try {
    const sweepsResponse = await api('/api/sweeps');
    const sweeps = (sweepsResponse && f(sweepsResponse, 'sweeps')) || [];
    if (state.sweepId === null && sweeps.length) state.sweepId = num(f(sweeps[0], 'id'));
    renderSweeps(sweeps);
    const sweep = sweeps.find(s => num(f(s, 'id')) === state.sweepId);
    document.getElementById('empty').hidden = !!sweep;
    document.getElementById('sweep-view').hidden = !sweep;
    if (sweep) {
      document.getElementById('sweep-title').textContent =
          `Sweep #${state.sweepId} — ${f(sweep, 'name') || ''}`;
      const counts = f(sweep, 'run_counts') || {};
      document.getElementById('sweep-counts').innerHTML = Object.entries(counts)
          .map(([k, v]) => `<span class="state ${k}">${k}: ${v}</span>`).join('');
      const runsResponse = await api(`/api/sweeps/${state.sweepId}/runs`);
      const runs = (runsResponse && f(runsResponse, 'runs')) || [];
      renderRuns(runs);
      await renderCurves(runs);
      renderFit(await api(`/api/sweeps/${state.sweepId}/fit`));
    }
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = 'true';
  } catch (error) {
    status.textContent = `error: ${error.message}`;
  }
}

for (const input of document.querySelectorAll('input[name=series]')) {
  input.addEventListener('change', () => { state.series = input.value; refresh(); });
}
refresh();
setInterval(refresh, REFRESH_MS);
