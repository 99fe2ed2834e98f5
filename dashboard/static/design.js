// design.js — the dashboard's law-guided design panel (docs/adaptive-design.md): for an
// adaptive sweep (spec.adaptive.enabled) or one that was given proposals by hand
// (xmodctl fit propose), the latest decision from /api/sweeps/{id}/decisions: compute spent
// against the budget, whether the design stopped and why, the recommended (K, A) per target
// with the share of the bootstrap ensemble that agrees, and the ranked proposals with their
// reasons and the runs they queued. Refetched when the sweep's run counts change.
'use strict';

const XmodDesign = (() => {
  let fetchedKey = null;

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
                                                              `going on (streak ${d.streak})`));
    const recommendations = table(
        ['target', 'K*', 'A*', 'Δ', 'p best', 'expected regret'],
        d.recommendations.map(
            r => [target(r.target), r.k, r.a, signed(r.delta), `${(100 * r.p_best).toFixed(0)}%`,
                  Number(r.expected_regret).toExponential(2)]));
    const proposals = table(
        ['#', 'run', 'cost (FLOPs)', 'score', 'reason', 'queued as'],
        d.proposals.map((p, i) => [
          i + 1,
          p.k > 1 ? `${p.backbone} L=${p.seq_len} K=${p.k} A=${p.a}` :
                    `dense ${p.backbone} L=${p.seq_len}`,
          Xmod.flops(p.cost_flops) + (p.needs_dense ? ' (with its dense)' : ''),
          Number(p.score).toPrecision(3), p.reason, Number(p.run_id) ? `run ${p.run_id}` : ''
        ]));
    box.replaceChildren(summary, recommendations, proposals);
  }

  // Called on every refresh with the selected sweep.
  async function update(sweep) {
    const box = document.getElementById('design');
    const key = `${sweep.id}|${JSON.stringify(sweep.run_counts)}`;
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
