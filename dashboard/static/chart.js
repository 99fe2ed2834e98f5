// chart.js — a small SVG line chart for the dashboard: x = training FLOPs on a log axis,
// y = loss on a linear axis. One <path class="curve"> per series with points, markers on
// sparse series. Interactive: hovering shows a read-out of the nearest point (series, C,
// value) in <g class="tooltip">; dragging across the plot zooms the x axis to the dragged
// range (y follows the points in view), a double-click resets it. The view (zoom, hover)
// is kept per <svg> across redraws, so a periodic redraw with new points keeps it; the zoom
// resets when the set of series changes (another sweep). A series with `dashed` (a reference
// curve) is drawn dashed. No dependencies.
'use strict';

const XmodChart = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const PALETTE = [
    '#2f6fdf', '#e4572e', '#17a398', '#f3a712', '#8e44ad', '#2d3047', '#c0392b', '#16a085',
    '#7f8c8d', '#d35400', '#27ae60', '#34495e'
  ];
  const W = 900, H = 380, LEFT = 60, RIGHT = 20, TOP = 14, BOTTOM = 44;
  const MUTED = '#6b7682';
  const MIN_DRAG_PX = 6;        // a shorter drag is a click, not a zoom
  const MIN_SPAN_DECADES = 1e-3;  // the narrowest x range a zoom may show
  const HOVER_PX = 40;          // no read-out farther than this from every point

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const colour = i => PALETTE[i % PALETTE.length];

  // "3e9", "1.5e10": compact scientific notation for FLOP labels.
  function sci(v, digits = 2) {
    const e = Math.floor(Math.log10(v) + 1e-9);
    const m = v / Math.pow(10, e);
    return `${Number(m.toPrecision(digits))}e${e}`;
  }

  // Log-axis ticks between 10^lo and 10^hi: decades, or 1-2-5 / 1..9 multiples when the
  // range spans few decades, so that a sub-decade range still gets several labels; a range
  // narrower than two of those (a deep zoom) gets evenly spaced ticks.
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
    if (ticks.length >= 3) return {ticks, digits: 2};
    const a = Math.pow(10, lo), b = Math.pow(10, hi);
    const {ticks: even} = linearTicks(a, b, 5);
    // Enough significant digits to tell neighbouring ticks apart.
    const step = even.length > 1 ? even[1] - even[0] : b - a;
    const digits = Math.min(6, Math.max(2, Math.ceil(Math.log10(b / step)) + 1));
    return {ticks: even.filter(v => v > 0), digits};
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

  // Per-<svg> view state: the last draw's arguments, the zoom (log10 x range or null), the
  // drag in progress, the points as drawn (for the hover read-out) and the scales.
  const views = new WeakMap();

  function view(svg) {
    let v = views.get(svg);
    if (v) return v;
    v = {series: [], yLabel: '', key: '', zoom: null, drag: null, hover: null, drawn: [],
         scale: null};
    views.set(svg, v);
    svg.addEventListener('pointerdown', event => onDown(svg, event));
    svg.addEventListener('pointermove', event => onMove(svg, event));
    svg.addEventListener('pointerup', event => onUp(svg, event));
    svg.addEventListener('pointercancel', () => endDrag(svg));
    svg.addEventListener('pointerleave', () => {
      v.hover = null;
      drawOverlay(svg);
    });
    svg.addEventListener('dblclick', event => {
      event.preventDefault();
      resetZoom(svg);
    });
    return v;
  }

  // Client (mouse) coordinates -> the SVG's viewBox coordinates.
  function toSvg(svg, event) {
    const ctm = svg.getScreenCTM();
    if (!ctm) return null;
    const p = new DOMPoint(event.clientX, event.clientY).matrixTransform(ctm.inverse());
    return {x: p.x, y: p.y};
  }

  const inPlot = p => p && p.x >= LEFT && p.x <= W - RIGHT && p.y >= TOP && p.y <= H - BOTTOM;
  const clampX = x => Math.min(W - RIGHT, Math.max(LEFT, x));

  function onDown(svg, event) {
    const v = view(svg);
    const p = toSvg(svg, event);
    if (event.button !== 0 || !v.scale || !inPlot(p)) return;
    event.preventDefault();  // no text selection while dragging
    v.drag = {from: p.x, to: p.x, pointer: event.pointerId};
    try {
      svg.setPointerCapture(event.pointerId);
    } catch (_) {
      // Synthetic events have no active pointer to capture; the drag still works.
    }
    drawOverlay(svg);
  }

  function onMove(svg, event) {
    const v = view(svg);
    const p = toSvg(svg, event);
    if (v.drag) {
      if (p) v.drag.to = clampX(p.x);
      v.hover = null;
    } else {
      v.hover = inPlot(p) ? p : null;
    }
    drawOverlay(svg);
  }

  function endDrag(svg) {
    const v = view(svg);
    const drag = v.drag;
    v.drag = null;
    if (drag && svg.hasPointerCapture && svg.hasPointerCapture(drag.pointer)) {
      svg.releasePointerCapture(drag.pointer);
    }
    return drag;
  }

  function onUp(svg, event) {
    const v = view(svg);
    const p = toSvg(svg, event);
    if (v.drag && p) v.drag.to = clampX(p.x);
    const drag = endDrag(svg);
    if (!drag || !v.scale || Math.abs(drag.to - drag.from) < MIN_DRAG_PX) {
      drawOverlay(svg);
      return;
    }
    const a = v.scale.invX(Math.min(drag.from, drag.to));
    const b = v.scale.invX(Math.max(drag.from, drag.to));
    const mid = (a + b) / 2;
    const half = Math.max(b - a, MIN_SPAN_DECADES) / 2;
    v.zoom = [mid - half, mid + half];
    v.hover = inPlot(p) ? p : null;
    render(svg);
  }

  function resetZoom(svg) {
    const v = view(svg);
    if (!v.zoom) return;
    v.zoom = null;
    render(svg);
  }

  // series: [{label, points: [[flops, loss], ...]}]; yLabel: the y-axis title.
  // Draws into `svg` (replacing its content); series without points are skipped but keep
  // their colour index, so colour(i) matches the caller's legend.
  function draw(svg, series, yLabel) {
    const v = view(svg);
    const key = series.map(s => s.label).join('\n');
    if (key !== v.key) v.zoom = null;  // another set of runs: show all of it
    v.key = key;
    v.series = series;
    v.yLabel = yLabel;
    render(svg);
  }

  function render(svg) {
    const v = view(svg);
    const series = v.series;
    svg.replaceChildren();
    v.drawn = [];
    v.scale = null;
    const usable = series.map(s => s.points.filter(p => p[0] > 0 && isFinite(p[1])));
    const all = usable.flat();
    if (all.length === 0) {
      delete svg.dataset.xMin;
      delete svg.dataset.xMax;
      delete svg.dataset.zoomed;
      svg.appendChild(
          el('text', {x: W / 2, y: H / 2, 'text-anchor': 'middle', fill: MUTED}, 'no points yet'));
      return;
    }
    let x0, x1;
    if (v.zoom) {
      [x0, x1] = v.zoom;
    } else {
      const lx = all.map(p => Math.log10(p[0]));
      x0 = Math.min(...lx);
      x1 = Math.max(...lx);
      if (x1 - x0 < 1e-6) {
        x0 -= 0.1;
        x1 += 0.1;
      }
      const xpad = (x1 - x0) * 0.02;
      x0 -= xpad;
      x1 += xpad;
    }
    // y follows what is in view: each series' points inside [x0, x1] and its nearest point
    // on either side (its line crosses the edge); all points when no series is in view.
    const inView = [];
    for (const pts of usable) {
      let before = null, after = null, inside = 0;
      for (const p of pts) {
        const l = Math.log10(p[0]);
        if (l < x0) {
          if (!before || p[0] > before[0]) before = p;
        } else if (l > x1) {
          if (!after || p[0] < after[0]) after = p;
        } else {
          inView.push(p);
          inside++;
        }
      }
      if (inside || (before && after)) inView.push(...[before, after].filter(Boolean));
    }
    const ys = (inView.length ? inView : all).map(p => p[1]);
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    const ypad = (y1 - y0) * 0.05 || 0.1;
    y0 -= ypad;
    y1 += ypad;
    const X = c => LEFT + (Math.log10(c) - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    const Y = y => TOP + (1 - (y - y0) / (y1 - y0)) * (H - TOP - BOTTOM);
    v.scale = {invX: x => x0 + (x - LEFT) / (W - LEFT - RIGHT) * (x1 - x0)};
    svg.dataset.xMin = sci(Math.pow(10, x0), 4);
    svg.dataset.xMax = sci(Math.pow(10, x1), 4);
    if (v.zoom) svg.dataset.zoomed = 'true';
    else delete svg.dataset.zoomed;

    const grid = el('g', {class: 'grid', stroke: '#e6eaee'});
    const labels = el('g', {class: 'ticks', 'font-size': 11, fill: MUTED});
    const xticks = logTicks(x0, x1);
    for (const c of xticks.ticks) {
      const x = X(c);
      grid.appendChild(el('line', {x1: x, x2: x, y1: TOP, y2: H - BOTTOM}));
      labels.appendChild(el(
          'text', {x, y: H - BOTTOM + 16, 'text-anchor': 'middle', class: 'xtick'},
          sci(c, xticks.digits)));
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
           v.yLabel));
    svg.appendChild(el('text', {
      x: W - RIGHT,
      y: H - 8,
      'text-anchor': 'end',
      'font-size': 11,
      class: 'hint'
    }, v.zoom ? 'zoomed: double-click to reset' : 'drag to zoom'));

    // Curves are clipped to the plot area (a zoom leaves points outside it).
    const clipId = `${svg.id || 'chart'}-plot-clip`;
    const defs = svg.appendChild(el('defs', {}));
    defs.appendChild(el('clipPath', {id: clipId}))
        .appendChild(
            el('rect', {x: LEFT, y: TOP, width: W - LEFT - RIGHT, height: H - TOP - BOTTOM}));
    const plot = svg.appendChild(el('g', {'clip-path': `url(#${clipId})`}));
    usable.forEach((pts, i) => {
      if (pts.length === 0) return;
      const label = series[i].label;
      const d =
          pts.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join('');
      plot.appendChild(el('path', {
        d,
        fill: 'none',
        stroke: colour(i),
        'stroke-width': 1.8,
        class: series[i].dashed ? 'curve reference' : 'curve',
        'stroke-dasharray': series[i].dashed ? '6 4' : 'none',
        'data-label': label,
        'data-points': pts.length
      }));
      for (const p of pts) v.drawn.push({x: X(p[0]), y: Y(p[1]), i, label, c: p[0], value: p[1]});
      if (pts.length > 40) return;  // dense curves: the line alone reads better
      const markers = el('g', {fill: colour(i), class: 'markers'});
      for (const p of pts) {
        markers.appendChild(el('circle', {cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 3}));
      }
      plot.appendChild(markers);
    });
    svg.appendChild(el('g', {class: 'overlay', 'pointer-events': 'none'}));
    drawOverlay(svg);
  }

  // The dragged x range, shaded across the plot's height.
  function drawSelection(overlay, drag) {
    const x = Math.min(drag.from, drag.to);
    overlay.appendChild(el('rect', {
      class: 'selection',
      x,
      y: TOP,
      width: Math.abs(drag.to - drag.from),
      height: H - TOP - BOTTOM,
      fill: 'rgba(47, 111, 223, 0.12)',
      stroke: '#2f6fdf',
      'stroke-dasharray': '3 2'
    }));
  }

  // The drawn point in the plot's x range nearest the pointer, null when none is within
  // HOVER_PX.
  function nearestPoint(drawn, hover) {
    let best = null, bestD = HOVER_PX * HOVER_PX;
    for (const p of drawn) {
      if (p.x < LEFT - 0.5 || p.x > W - RIGHT + 0.5) continue;  // zoomed out of view
      const d = (p.x - hover.x) ** 2 + (p.y - hover.y) ** 2;
      if (d < bestD) {
        best = p;
        bestD = d;
      }
    }
    return best;
  }

  // The top left corner of a width x height box beside point p: below right of it, flipped
  // to the other side where that would leave the plot.
  function tooltipCorner(p, width, height) {
    let tx = p.x + 12, ty = p.y + 12;
    if (tx + width > W - RIGHT) tx = p.x - 12 - width;
    if (ty + height > H - BOTTOM) ty = p.y - 12 - height;
    return {tx: Math.max(LEFT, tx), ty: Math.max(TOP, ty)};
  }

  // The read-out of point best: a vertical guide, a ring around the point and a box with its
  // series, C and value.
  function drawReadout(overlay, best, yLabel) {
    overlay.appendChild(el('line', {
      x1: best.x, x2: best.x, y1: TOP, y2: H - BOTTOM, stroke: '#9aa5b1', 'stroke-dasharray': '2 3'
    }));
    overlay.appendChild(el('circle', {
      cx: best.x, cy: best.y, r: 5, fill: 'none', stroke: colour(best.i), 'stroke-width': 2
    }));
    const name = yLabel.split(' ')[0];  // the series' name: "<series> (nats)" -> "<series>"
    const lines =
        [best.label, `C = ${sci(best.c, 3)} FLOPs`, `${name} = ${best.value.toFixed(4)}`];
    const tip = overlay.appendChild(el('g', {
      class: 'tooltip',
      'data-label': best.label,
      'data-flops': best.c,
      'data-value': best.value
    }));
    const width = 14 + 6.6 * Math.max(...lines.map(s => s.length));
    const height = 10 + 16 * lines.length;
    const {tx, ty} = tooltipCorner(best, width, height);
    tip.appendChild(el('rect', {
      x: tx, y: ty, width, height, rx: 4, fill: '#fff', stroke: colour(best.i), opacity: 0.95
    }));
    lines.forEach((line, j) => {
      tip.appendChild(el('text', {
        x: tx + 7,
        y: ty + 18 + 16 * j,
        'font-size': 12,
        'font-weight': j === 0 ? 600 : 400,
        class: j === 0 ? 'series' : 'value'
      }, line));
    });
  }

  // The drag selection, or the hover read-out of the point nearest the pointer.
  function drawOverlay(svg) {
    const v = view(svg);
    const overlay = svg.querySelector('g.overlay');
    if (!overlay) return;
    overlay.replaceChildren();
    if (v.drag) {
      drawSelection(overlay, v.drag);
      return;
    }
    if (!v.hover) return;
    const best = nearestPoint(v.drawn, v.hover);
    if (best) drawReadout(overlay, best, v.yLabel);
  }

  return {draw, colour, sci, resetZoom};
})();
