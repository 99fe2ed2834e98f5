// fit.js — the dashboard's scaling-law panel: the sweep's latest fit of paper Eq. 14
// (parameters with bootstrap intervals, R²_Δ, RMSE, MAE, grouped CV) from
// /api/sweeps/{id}/fit, and, once a fit exists, a form asking
// /api/sweeps/{id}/recommend for the best (K, A) at a budget C, context L and backbone
// (paper §3.1). The fit is refetched when the sweep's run counts change and every 15 s
// (the coordinator refits in the background as runs succeed). The same panel shows a
// study's fit (/api/studies/{name}/fit: one fit over several sweeps), without the form.
'use strict';

const XmodFit = (() => {
  // LawParams: proto field name (the JSON key, and as Fit.at_bound lists them), paper
  // symbol (Table 8).
  const PARAMS = [
    ['e', 'e'], ['u', 'u'], ['eta_n', 'η_N'], ['rho_n', 'ρ_N'], ['w', 'w'], ['eta_l', 'η_L'],
    ['rho_l', 'ρ_L'], ['z', 'z'], ['rho_k', 'ρ_K'], ['rho_a', 'ρ_A']
  ];
  const REFETCH_MS = 15000;  // refits land in the background: look again this often
  let fetchedKey = null;     // sweep id + counts the shown fit was fetched for
  let fetchedAt = 0;         // Date.now() of that fetch
  let formSweep = null;      // sweep id the recommendation form was built for

  function paramsTable(fit) {
    const table = Xmod.node('table', 'params');
    const ci = fit.ci_low && fit.ci_high;
    const head = table.appendChild(Xmod.node('tr'));
    for (const h of ['parameter', 'estimate'].concat(ci ? ['95% bootstrap'] : [])) {
      head.appendChild(Xmod.node('th', '', h));
    }
    const atBound = new Set(fit.at_bound);
    for (const [field, label] of PARAMS) {
      const tr = table.appendChild(Xmod.node('tr'));
      tr.dataset.param = field;
      Xmod.cell(tr, label + (atBound.has(field) ? ' (at bound)' : ''));
      Xmod.cell(tr, fit.params[field].toPrecision(4), 'num');
      if (ci) {
        Xmod.cell(
            tr, `[${fit.ci_low[field].toPrecision(3)}, ${fit.ci_high[field].toPrecision(3)}]`, 'num');
      }
    }
    return table;
  }

  function cvTable(cv) {
    const table = Xmod.node('table', 'cv');
    const head = table.appendChild(Xmod.node('tr'));
    for (const h of ['held-out group', 'runs', 'loss RMSE'])
      head.appendChild(Xmod.node('th', '', h));
    for (const g of cv) {
      const tr = table.appendChild(Xmod.node('tr'));
      Xmod.cell(tr, g.group);
      Xmod.cell(tr, g.n, 'num');
      Xmod.cell(tr, g.rmse.toFixed(4), 'num');
    }
    return table;
  }

  // A sweep without a `fit` block (or with default-valued fields, which protobuf's JSON
  // leaves out) has no fit.
  function fitEnabled(sweep) {
    return Boolean(sweep.spec && sweep.spec.fit && sweep.spec.fit.enabled);
  }

  // `why`: the API's message when there is no usable fit (it names a failed attempt).
  function renderFit(box, sweep, fit, why) {
    if (!fitEnabled(sweep)) {
      box.textContent = 'The law fit is off for this sweep (spec fit.enabled is false).';
      return;
    }
    renderFitOrWhy(box, fit, why, 'of the sweep');
  }

  // A study's fit (or why there is none yet).
  function renderStudyFit(box, fit, why) {
    renderFitOrWhy(box, fit, why, 'of its member sweeps');
  }

  // `whose`: whose runs must succeed before there is a fit ("of the sweep").
  function renderFitOrWhy(box, fit, why, whose) {
    if (!fit) {
      const failed = /latest attempt failed: (.*)/s.exec(why);
      box.replaceChildren(`No fit yet: it runs as Dense and sparse runs ${whose} succeed.`);
      if (failed) box.appendChild(Xmod.node('p', 'error', `Latest fit failed: ${failed[1]}`));
      return;
    }
    const parts = [];
    if (fit.error) {
      parts.push(Xmod.node('p', 'error', `A newer fit attempt failed: ${fit.error}`));
    }
    if (fit.n_obs > 0) {
      parts.push(Xmod.node(
          'p', 'summary',
          `R²_Δ = ${fit.r2.toFixed(4)} · RMSE = ${fit.rmse.toFixed(4)} · ` +
              `MAE = ${fit.mae.toFixed(4)} · ${fit.n_obs} observations · ` +
              `fitted ${Xmod.time(fit.created_unix_ms)}`));
      // B.5: stages by sweep, stage 2 with an offset of its own (reported, not predicted with).
      parts.push(Xmod.node(
          'p', 'stages',
          fit.by_sweep ? `stages by sweep (B.5) · stage-2 offset e₂ = ${fit.e_stage2.toFixed(4)}` :
                        'stages by A'));
      const tables = Xmod.node('div', 'fit-tables');
      tables.appendChild(paramsTable(fit));
      if (fit.cv.length) tables.appendChild(cvTable(fit.cv));
      parts.push(tables);
    }
    box.replaceChildren(...parts);
  }

  function buildForm(form, sweep, runs) {
    const backbones = [...new Set(runs.map(r => r.spec.model.backbone.name))];
    const sparse = runs.find(r => r.spec.model.arch !== 'DENSE') || runs[0];
    const budget = Math.max(...runs.map(r => r.spec.training.flop_budget));
    form.elements.flops.value = Xmod.flops(budget);
    form.elements.seq_len.value = sparse ? sparse.spec.training.seq_len : '';
    const select = form.elements.backbone;
    select.replaceChildren(...backbones.map(b => new Option(b, b)));
    document.getElementById('recommendation').replaceChildren();
    form.onsubmit = event => {
      event.preventDefault();
      recommend(sweep.id, form);
    };
  }

  // The best candidates of a recommendation; the loss column only where a dense curve
  // covers C, the interval only where the fit was bootstrapped.
  function candidatesTable(candidates) {
    const withLoss = candidates.some(c => c.loss);
    const withCi = candidates.some(c => c.delta_low !== c.delta_high);
    const table = Xmod.node('table', 'candidates');
    const head = table.appendChild(Xmod.node('tr'));
    const titles = ['K', 'A', 'Δ'].concat(withLoss ? ['loss'] : [], withCi ? ['Δ 95%'] : []);
    for (const h of titles) head.appendChild(Xmod.node('th', 'num', h));
    for (const c of candidates) {
      const tr = table.appendChild(Xmod.node('tr'));
      Xmod.cell(tr, c.point.k, 'num');
      Xmod.cell(tr, c.point.a, 'num');
      Xmod.cell(tr, c.delta.toFixed(4), 'num');
      if (withLoss) Xmod.cell(tr, c.loss ? c.loss.toFixed(4) : '', 'num');
      if (withCi) Xmod.cell(tr, `[${c.delta_low.toFixed(4)}, ${c.delta_high.toFixed(4)}]`, 'num');
    }
    return table;
  }

  async function recommend(sweepId, form) {
    const out = document.getElementById('recommendation');
    const query = new URLSearchParams({
      flops: Number(form.elements.flops.value),
      seq_len: form.elements.seq_len.value,
      backbone: form.elements.backbone.value,
    });
    const cap = form.elements.max_total_params.value.trim();
    if (cap) query.set('max_total_params', Number(cap));
    out.textContent = 'asking…';
    try {
      const answer = await Xmod.api(`/api/sweeps/${sweepId}/recommend?${query}`);
      if (!answer) throw new Error('no fit to recommend from');
      const best = Xmod.node('p', 'best');
      best.dataset.totalParams = answer.total_params;
      best.append(
          'Best: ', Xmod.node('b', '', `K* = ${answer.k}, A* = ${answer.a}`),
          ` · predicted Δ = ${answer.delta.toFixed(4)} nats · ` +
              `N = ${Xmod.count(answer.total_params)}`);
      out.replaceChildren(best, candidatesTable(answer.candidates.slice(0, 8)));
    } catch (error) {
      out.replaceChildren(Xmod.node('p', 'error', error.message));
    }
  }

  // Called on every refresh with the selected sweep and its runs.
  async function update(sweep, runs) {
    const key = `${sweep.id}|${sweep.state}|${JSON.stringify(sweep.run_counts)}`;
    if (key === fetchedKey && Date.now() - fetchedAt < REFETCH_MS) return;
    const enabled = fitEnabled(sweep);
    let why = '';
    const remember = message => {
      why = message;
    };
    const fit = enabled ? await Xmod.api(`/api/sweeps/${sweep.id}/fit`, remember) : null;
    fetchedKey = key;
    fetchedAt = Date.now();
    renderFit(document.getElementById('fit'), sweep, fit, why);
    const form = document.getElementById('recommend');
    form.hidden = !(fit && fit.n_obs > 0);
    if (!form.hidden && formSweep !== sweep.id) {
      buildForm(form, sweep, runs);
      formSweep = sweep.id;
    }
  }

  return {update, renderStudyFit};
})();
