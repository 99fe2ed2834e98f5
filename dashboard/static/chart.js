// chart.js — a small SVG line chart for the dashboard: x = training FLOPs on a log axis,
// y = loss on a linear axis. One <path class="curve"> per series with points, markers on
// sparse series, a <title> per point for hover read-out. No dependencies; no state.
'use strict';

const XmodChart = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const PALETTE = [
    '#2f6fdf', '#e4572e', '#17a398', '#f3a712', '#8e44ad', '#2d3047', '#c0392b', '#16a085',
    '#7f8c8d', '#d35400', '#27ae60', '#34495e'
  ];
  const W = 900, H = 380, LEFT = 60, RIGHT = 20, TOP = 14, BOTTOM = 44;
  const MUTED = '#6b7682';

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const colour = i => PALETTE[i % PALETTE.length];

  // "3e9", "1.5e10": compact scientific notation for FLOP labels.
  function sci(v) {
    const e = Math.floor(Math.log10(v) + 1e-9);
    const m = v / Math.pow(10, e);
    return `${Number(m.toPrecision(2))}e${e}`;
  }

  // Log-axis ticks between 10^lo and 10^hi: decades, or 1-2-5 / 1..9 multiples when the
  // range spans few decades, so that a sub-decade range still gets several labels.
  function logTicks(lo, hi) {
    const span = hi - lo;
    const mults = span > 3 ? [1] : span > 1 ? [1, 2, 5] : [1, 2, 3, 4, 5, 6, 7, 8, 9];
    const ticks = [];
    for (let d = Math.floor(lo); d <= Math.ceil(hi); d++) {
      for (const m of mults) {
        const v = m * Math.pow(10, d);
        const lv = Math.log10(v);
        if (lv >= lo - 1e-9 && lv <= hi + 1e-9) ticks.push(v);
      }
    }
    return ticks;
  }

  function linearTicks(lo, hi, count) {
    const raw = (hi - lo || 1) / count;
    const step = Math.pow(10, Math.floor(Math.log10(raw)));
    const err = raw / step;
    const inc = step * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
    const ticks = [];
    for (let t = Math.ceil(lo / inc) * inc; t <= hi + inc * 1e-9; t += inc) ticks.push(t);
    return {ticks, digits: Math.max(0, -Math.floor(Math.log10(inc)))};
  }

  // series: [{label, points: [[flops, loss], ...]}]; yLabel: the y-axis title.
  // Draws into `svg` (replacing its content); series without points are skipped but keep
  // their colour index, so colour(i) matches the caller's legend.
  function draw(svg, series, yLabel) {
    svg.replaceChildren();
    const usable = series.map(s => s.points.filter(p => p[0] > 0 && isFinite(p[1])));
    const all = usable.flat();
    if (all.length === 0) {
      svg.appendChild(
          el('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', fill: MUTED}, 'no points yet'));
      return;
    }
    const lx = all.map(p => Math.log10(p[0]));
    let x0 = Math.min(...lx), x1 = Math.max(...lx);
    if (x1 - x0 < 1e-6) {
      x0 -= 0.1;
      x1 += 0.1;
    }
    const xpad = (x1 - x0) * 0.02;
    x0 -= xpad;
    x1 += xpad;
    let y0 = Math.min(...all.map(p => p[1])), y1 = Math.max(...all.map(p => p[1]));
    const ypad = (y1 - y0) * 0.05 || 0.1;
    y0 -= ypad;
    y1 += ypad;
    const X = v => LEFT + (Math.log10(v) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    const Y = v => TOP + (1 - (v - y0) / (y1 - y0)) * (H - TOP - BOTTOM);

    const grid = el('g', {class: 'grid', stroke: '#e6eaee'});
    const labels = el('g', {'font-size': 11, fill: MUTED});
    for (const v of logTicks(x0, x1)) {
      const x = X(v);
      grid.appendChild(el('line', {x1: x, x2: x, y1: TOP, y2: H - BOTTOM}));
      labels.appendChild(el('text', {x, y: H - BOTTOM + 16, 'text-anchor': 'middle'}, sci(v)));
    }
    const {ticks, digits} = linearTicks(y0, y1, 6);
    for (const t of ticks) {
      const y = Y(t);
      grid.appendChild(el('line', {x1: LEFT, x2: W - RIGHT, y1: y, y2: y}));
      labels.appendChild(
          el('text', {x: LEFT - 6, y: y + 4, 'text-anchor': 'end'}, t.toFixed(digits)));
    }
    svg.append(grid, labels);
    svg.appendChild(el('rect', {
      x: LEFT,
      y: TOP,
      width: W - LEFT - RIGHT,
      height: H - TOP - BOTTOM,
      fill: 'none',
      stroke: '#c9d1d8'
    }));
    svg.appendChild(
        el('text', {x: (W + LEFT) / 2, y: H - 8, 'text-anchor': 'middle', 'font-size': 12},
           'training FLOPs (log scale)'));
    svg.appendChild(
        el('text', {
          x: 14,
          y: (H - BOTTOM) / 2,
          'text-anchor': 'middle',
          'font-size': 12,
          transform: `rotate(-90 14 ${(H - BOTTOM) / 2})`
        },
           yLabel));

    usable.forEach((pts, i) => {
      if (pts.length === 0) return;
      const label = series[i].label;
      const d =
          pts.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
      const path = el('path', {
        d,
        fill: 'none',
        stroke: colour(i),
        'stroke-width': 1.8,
        class: 'curve',
        'data-label': label,
        'data-points': pts.length
      });
      path.appendChild(el('title', {}, label));
      svg.appendChild(path);
      if (pts.length > 40) return;  // dense curves: the line alone reads better
      const markers = el('g', {fill: colour(i), class: 'markers'});
      for (const p of pts) {
        const dot = el('circle', {cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 3});
        dot.appendChild(
            el('title', {},
               `${label}\nC = ${sci(p[0])} FLOPs\n` +
                   `loss = ${p[1].toFixed(4)}`));
        markers.appendChild(dot);
      }
      svg.appendChild(markers);
    });
  }

  return {draw, colour, sci};
})();
