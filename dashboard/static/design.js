// design.js — the dashboard's law-guided design panel (docs/adaptive-design.md): for an
// adaptive sweep (spec.adaptive.enabled) or one that was given proposals by hand
// (xmodctl fit propose), the latest decision from /api/sweeps/{id}/decisions: compute spent
// against the budget, whether the design stopped and why, the recommended (K, A) per target
// with the share of the bootstrap ensemble that agrees, and the ranked proposals with their
// reasons and the runs they queued; and the regret curve: each decision's expected regret and
// regret bound (the largest over the targets) against the compute spent when it was made.
// Refetched when the sweep's run counts or its state change (a design's stop ends the sweep
// with no run changing).
'use strict';

const XmodDesign = (() => {
  let fetchedKey = null;
  let curve = null;  // the regret chart's <svg>, kept across redraws (its zoom with it)

  // Regret against compute: one point per decision that had a fit, oldest first.
  function regretSeries(decisions) {
    const fitted = decisions.filter(d => d.recommendations.length)
                       .sort((x, y) => Number(x.compute_spent) - Number(y.compute_spent));
    const largest = (d, field) => Math.max(...d.recommendations.map(r => Number(r[field] || 0)));
    const confidence = fitted.length ? Number(fitted[0].recommendations[0].confidence || 0) : 0;
    return [
      {
        label: 'expected regret (largest over targets)',
        points: fitted.map(d => [Number(d.compute_spent), largest(d, 'expected_regret')])
      },
      {
        label: `regret bound at confidence ${confidence}`,
        points: fitted.map(d => [Number(d.compute_spent), largest(d, 'regret_bound')])
      }
    ];
  }

  function regretChart(decisions) {
    const SVG = 'http://www.w3.org/2000/svg';
    if (!curve) {
      curve = document.createElementNS(SVG, 'svg');
      curve.setAttribute('id', 'design-regret');
      curve.setAttribute('viewBox', '0 0 900 380');
      curve.setAttribute('role', 'img');
      curve.setAttribute('aria-label', 'design regret against compute');
    }
    const series = regretSeries(decisions);
    XmodChart.draw(curve, series, 'regret (nats)');
    const legend = Xmod.node('p', 'legend');
    series.forEach((s, i) => {
      const item = legend.appendChild(Xmod.node('span', '', `■ ${s.label}`));
      item.style.color = XmodChart.colour(i);
      legend.appendChild(document.createTextNode(' '));
    });
    return [Xmod.node('h4', '', 'Regret against compute spent'), curve, legend];
  }

  const target = t => `C=${Xmod.flops(t.flops)} L=${t.seq_len} ${t.backbone}`;
  const signed = d => (d >= 0 ? '+' : '') + Number(d).toFixed(4);

  function table(headers, rows) {
    const t = Xmod.node('table', 'design');
    const head = t.appendChild(Xmod.node('tr'));
    for (const h of headers) head.appendChild(Xmod.node('th', '', h));
    for (const row of rows) {
      const tr = t.appendChild(Xmod.node('tr'));
      for (const value of row) Xmod.cell(tr, value);
    }
    return t;
  }

  function render(box, decisions) {
    const d = decisions[0];
    const budget = d.compute_budget ? ` of ${Xmod.flops(d.compute_budget)}` : '';
    const summary = Xmod.node(
        'p', 'design-summary',
        `Decision ${d.id} (${d.source}, ${decisions.length} so far) · ` +
            `${Xmod.flops(d.compute_spent)}${budget} FLOPs spent · ` +
            `${d.observations} configurations fitted · ` +
            (d.stop ? `stopped: ${d.stop_reason}` : d.fit_error ? `no fit yet: ${d.fit_error}` :
                                                              `going on (streak ${d.streak})`) +
            (d.held_back ? ` · ${d.held_back}` : ''));
    const recommendations = table(
        ['target', 'K*', 'A*', 'Δ', 'p best', 'expected regret', 'regret bound'],
        d.recommendations.map(
            r => [target(r.target), r.k, r.a, signed(r.delta), `${(100 * r.p_best).toFixed(0)}%`,
                  Number(r.expected_regret).toExponential(2),
                  `${Number(r.regret_bound || 0).toExponential(2)} at ${r.confidence || 0}`]));
    const proposals = table(
        ['#', 'run', 'cost (FLOPs)', 'score', 'reason', 'queued as'],
        d.proposals.map((p, i) => [
          i + 1,
          p.k > 1 ? `${p.backbone} L=${p.seq_len} K=${p.k} A=${p.a}` :
                    `dense ${p.backbone} L=${p.seq_len}`,
          Xmod.flops(p.cost_flops) + (p.needs_dense ? ' (with its dense)' : ''),
          Number(p.score).toPrecision(3), p.reason, Number(p.run_id) ? `run ${p.run_id}` : ''
        ]));
    box.replaceChildren(summary, recommendations, ...regretChart(decisions), proposals);
  }

  // Called on every refresh with the selected sweep.
  async function update(sweep) {
    const box = document.getElementById('design');
    const key = `${sweep.id}|${sweep.state}|${JSON.stringify(sweep.run_counts)}`;
    if (key === fetchedKey) return;
    fetchedKey = key;
    const answer = await Xmod.api(`/api/sweeps/${sweep.id}/decisions`);
    const decisions = answer ? answer.decisions : [];
    const adaptive = Boolean(sweep.spec.adaptive && sweep.spec.adaptive.enabled);
    box.hidden = !adaptive && !decisions.length;
    document.getElementById('design-title').hidden = box.hidden;
    if (box.hidden) return;
    if (!decisions.length) {
      box.replaceChildren(Xmod.node('p', '', 'No decision yet: the seed runs are training.'));
      return;
    }
    render(box, decisions);
  }

  return {update};
})();
