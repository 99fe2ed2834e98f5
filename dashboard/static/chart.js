// chart.js — a small SVG line chart with a log-scaled x axis (training FLOPs) and a linear
// y axis (loss), for the dashboard's curves. No dependencies.
'use strict';

const XmodChart = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#2f6fdf', '#e4572e', '#17a398', '#f3a712', '#8e44ad', '#2d3047', '#c0392b',
                   '#16a085', '#7f8c8d', '#d35400', '#27ae60', '#34495e'];

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function niceTicks(lo, hi, count) {
    const span = hi - lo || 1;
    const step = Math.pow(10, Math.floor(Math.log10(span / count)));
    const err = (span / count) / step;
    const mult = err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    const ticks = [];
    for (let t = Math.ceil(lo / (step * mult)) * step * mult; t <= hi + 1e-12; t += step * mult) {
      ticks.push(t);
    }
    return ticks;
  }

  // series: [{label, points: [[flops, loss], ...]}]. Draws into `svg`; returns colours.
  function draw(svg, series) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = 900, H = 380, left = 60, right = 20, top = 14, bottom = 44;
    const all = series.flatMap(s => s.points).filter(p => p[0] > 0 && isFinite(p[1]));
    if (all.length === 0) {
      svg.appendChild(el('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', fill: '#6b7682'},
                         'no points yet'));
      return [];
    }
    const lx = all.map(p => Math.log10(p[0]));
    let x0 = Math.min(...lx), x1 = Math.max(...lx);
    if (x1 - x0 < 1e-9) { x0 -= 0.5; x1 += 0.5; }
    let y0 = Math.min(...all.map(p => p[1])), y1 = Math.max(...all.map(p => p[1]));
    const pad = (y1 - y0) * 0.05 || 0.1;
    y0 -= pad; y1 += pad;
    const X = v => left + (Math.log10(v) - x0) / (x1 - x0) * (W - left - right);
    const Y = v => top + (1 - (v - y0) / (y1 - y0)) * (H - top - bottom);

    const axes = el('g', {class: 'axes', stroke: '#dde3e8'});
    for (let d = Math.ceil(x0); d <= Math.floor(x1); d++) {
      const x = X(Math.pow(10, d));
      axes.appendChild(el('line', {x1: x, x2: x, y1: top, y2: H - bottom}));
      svg.appendChild(el('text', {x, y: H - bottom + 16, 'text-anchor': 'middle',
                                  'font-size': 11, fill: '#6b7682'}, `1e${d}`));
    }
    for (const t of niceTicks(y0, y1, 6)) {
      const y = Y(t);
      axes.appendChild(el('line', {x1: left, x2: W - right, y1: y, y2: y}));
      svg.appendChild(el('text', {x: left - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 11,
                                  fill: '#6b7682'}, t.toFixed(2)));
    }
    svg.insertBefore(axes, svg.firstChild);
    svg.appendChild(el('text', {x: (W + left) / 2, y: H - 8, 'text-anchor': 'middle',
                                'font-size': 12, fill: '#1d232a'}, 'training FLOPs (log)'));

    const colours = [];
    series.forEach((s, i) => {
      const colour = PALETTE[i % PALETTE.length];
      colours.push(colour);
      const pts = s.points.filter(p => p[0] > 0 && isFinite(p[1]));
      if (pts.length === 0) return;
      const d = pts.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`)
                   .join('');
      const path = el('path', {d, fill: 'none', stroke: colour, 'stroke-width': 1.8,
                               class: 'curve', 'data-label': s.label});
      path.appendChild(el('title', {}, s.label));
      svg.appendChild(path);
    });
    return colours;
  }

  return {draw};
})();
