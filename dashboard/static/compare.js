// compare.js — the comparison view: runs or configurations (replicate groups) picked in the
// runs table, their validation-loss curves overlaid against training FLOPs, with the dense
// reference of each (backbone, L) drawn dashed (the Dense run the live Δ is measured
// against, paper §3: Δ at matched training FLOPs). Curves are fetched once a run has ended
// and again while it trains, only for what is picked.
'use strict';

const XmodCompare = (() => {
  // Seeds drawn of a picked configuration (a sweep may have 1,000): the first ones in the
  // table's order; the legend says how many of how many.
  const MAX_SEEDS = 12;
  const picked = new Map();  // key ("run:ID" or "group:KEY") -> {label, runs: [Run, ...]}
  const curves = new Map();  // run id -> {state, points: [[flops, val loss], ...]}
  const dense = new Map();   // "sweep|backbone|L" -> promise of the dense reference Run, or null

  const isPicked = key => picked.has(key);

  async function pick(key, label, runs, on) {
    if (on) {
      picked.set(key, {label, runs});
    } else {
      picked.delete(key);
    }
    await render();
  }

  async function curveOf(run) {
    const id = Number(run.id);
    // A run that never took a step (queued, or ended before training) has no curve.
    if (run.state !== 'RUNNING' && Number(run.progress.step) === 0) return [];
    const cached = curves.get(id);
    if (cached && cached.state === run.state && run.state !== 'RUNNING') return cached.points;
    const data = await Xmod.api(`/api/runs/${id}/metrics?names=val/loss&max_points=400`);
    const points = (data?.series || []).flatMap(s => s.points.map(p => [p.flops, p.value]));
    curves.set(id, {state: run.state, points});
    return points;
  }

  // The Dense run at the run's backbone and L in its sweep, if the sweep has one.
  async function denseOf(run) {
    const backbone = run.spec.model.backbone.name;
    const seqLen = run.spec.training.seq_len;
    const key = `${run.sweep_id}|${backbone}|${seqLen}`;
    if (!dense.has(key)) {
      const p = new URLSearchParams(
          {arch: 'dense', backbone, seq_len: seqLen, sort: 'val_loss', page_size: 50});
      // The answer's promise is kept, so renders that overlap (two quick picks) ask once.
      dense.set(key, Xmod.api(`/api/sweeps/${run.sweep_id}/runs?${p}`).then(body => {
        const runs = body?.runs || [];
        return runs.find(r => Number(r.progress.step) > 0) || runs[0] || null;
      }, error => {
        dense.delete(key);  // a failed read is asked again by the next render
        throw error;
      }));
    }
    return dense.get(key);
  }

  async function render() {
    const box = document.getElementById('compare');
    box.hidden = picked.size === 0;
    if (!picked.size) return;
    const series = [];
    const references = new Map();
    for (const {label, runs} of picked.values()) {
      const drawn = runs.slice(0, MAX_SEEDS);
      const of = runs.length > drawn.length ? ` (${drawn.length} of ${runs.length} seeds)` : '';
      for (const run of drawn) {
        const seed = runs.length > 1 ? ` s${run.spec.training.seed}${of}` : '';
        series.push({label: `${label}${seed}`, points: await curveOf(run)});
        if (run.spec.model.arch === 'DENSE') continue;
        const reference = await denseOf(run);
        if (reference) references.set(Number(reference.id), reference);
      }
    }
    for (const reference of references.values()) {
      series.push({
        label: `dense reference ${reference.name}`,
        points: await curveOf(reference),
        dashed: true,
      });
    }
    const svg = document.getElementById('compare-chart');
    XmodChart.draw(svg, series, 'val/loss (nats)');
    svg.dataset.series = String(series.length);
    const legend = document.getElementById('compare-legend');
    legend.replaceChildren();
    series.forEach((s, i) => {
      const item = Xmod.node('span', s.dashed ? 'reference' : '');
      item.appendChild(Xmod.node('i')).style.background = XmodChart.colour(i);
      const last = s.points.length ? Xmod.loss(s.points[s.points.length - 1][1]) : 'no points yet';
      item.append(`${s.label} `, Xmod.node('b', '', last));
      legend.appendChild(item);
    });
  }

  function clear() {
    picked.clear();
    dense.clear();
    for (const box of document.querySelectorAll('#runs input.pick')) box.checked = false;
    return render();
  }

  document.getElementById('compare-clear').addEventListener('click', clear);

  return {pick, isPicked, render, clear};
})();
