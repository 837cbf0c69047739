/* udamon report html: draws the heatmap, the working-set chart and the
 * scheme charts from the JSON in #udamon-data (see crates/udamon-report/
 * src/html.rs for its fields). Written by hand: no library, nothing fetched.
 *
 * The heatmap's cells are painted once into an off-screen image, one pixel
 * per cell (time to the right, addresses up); zooming and panning redraw a
 * part of it. `view` is that part, in cells: [t0, t1) x [a0, a1). The
 * process picker (#process) loads another heatmap and working set (one of
 * D.processes.list) in their place. */
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('udamon-data').textContent);
  // The heatmap and working set shown: the page's, or a process's.
  let H, T, A, binUs, binBytes, freq, age, segs, W_;
  const MONO = 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace';

  // Formatting, as the Rust side formats (fmt_bytes, fmt_us).
  const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  function fmtBytes(b) {
    if (b < 1024) return Math.round(b) + ' B';
    let v = b / 1024, u = 0;
    while (v >= 1023.95 && u + 1 < UNITS.length) { v /= 1024; u++; }
    return v.toFixed(1) + ' ' + UNITS[u];
  }
  // Seconds with as many decimals as `stepUs` needs.
  function secs(us, stepUs) {
    const d = stepUs >= 1e6 ? 0 : Math.min(6, Math.ceil(-Math.log10(stepUs / 1e6) - 1e-9));
    return (us / 1e6).toFixed(d);
  }
  // An age decoded from its byte, which holds it to a few percent.
  function approx(us) {
    const two = (x) => '&asymp; ' + (x >= 10 ? x.toFixed(0) : x.toPrecision(2));
    if (us < 1000) return us === 0 ? '0' : '&lt; 1 ms';
    if (us < 1e6) return two(us / 1e3) + ' ms';
    if (us < 120e6) return two(us / 1e6) + ' s';
    if (us < 7200e6) return two(us / 60e6) + ' min';
    return two(us / 3600e6) + ' h';
  }
  const hex = (a) => '0x' + a.toString(16);
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  // Round steps of bytes: powers of two (256 MiB, 512 MiB, 1 GiB, ...).
  const niceBytes = (raw) => Math.pow(2, Math.max(0, Math.ceil(Math.log2(raw))));
  // Ticks of a time span [u0, u1] in us drawn over `px` pixels.
  function timeTicks(u0, u1, px) {
    const step = niceStep((u1 - u0) / Math.max(2, px / 90));
    const out = [];
    for (let k = Math.ceil(u0 / step); k * step <= u1 + step * 1e-9; k++) {
      out.push({ us: k * step, label: secs(k * step, step) });
    }
    return out;
  }

  function decode(s) {
    const bin = atob(s);
    const a = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a;
  }
  // Byte codes: 0 not monitored; frequency (c - 1) / 254; age
  // 1000 (2^((c - 1) / k) - 1) us.
  const freqOf = (c) => (c - 1) / 254;
  const ageOf = (c) => 1000 * (Math.pow(2, (c - 1) / H.age_k) - 1);

  // Viridis at 9 stops, as crates/udamon-report/src/color.rs.
  const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
    [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
  function viridis(f) {
    const x = Math.min(1, Math.max(0, f)) * 8, i = Math.min(7, Math.floor(x)), t = x - i;
    return [0, 1, 2].map((k) => Math.round(VIRIDIS[i][k] + (VIRIDIS[i + 1][k] - VIRIDIS[i][k]) * t));
  }

  // The address axis: monitored segments end to end, the gaps between
  // them collapsed. Addresses are BigInts (JavaScript numbers hold 53 bits).
  function segAt(pos) {
    let i = 0;
    while (i + 1 < segs.length && segs[i + 1].off <= pos) i++;
    return segs[i];
  }
  function addrIn(g, pos) {
    return g.start + BigInt(Math.floor(Math.min(Math.max(pos - g.off, 0), g.len)));
  }

  // One pixel per cell, addresses up.
  const img = document.createElement('canvas');
  function paint() {
    const ictx = img.getContext('2d');
    const data = ictx.createImageData(T, A);
    const px = data.data;
    const lut = new Uint8Array(256 * 3);
    lut.set([220, 220, 220], 0);
    for (let c = 1; c < 256; c++) lut.set(viridis(freqOf(c)), c * 3);
    for (let t = 0; t < T; t++) {
      for (let a = 0; a < A; a++) {
        const c = freq[t * A + a] * 3, o = ((A - 1 - a) * T + t) * 4;
        px[o] = lut[c]; px[o + 1] = lut[c + 1]; px[o + 2] = lut[c + 2]; px[o + 3] = 255;
      }
    }
    ictx.putImageData(data, 0, 0);
  }

  const cv = document.getElementById('heatmap');
  const ctx = cv.getContext('2d');
  const taxis = document.getElementById('time-axis');
  const aaxis = document.getElementById('addr-axis');
  const readout = document.getElementById('readout');
  const viewEl = document.getElementById('view');
  const view = { t0: 0, t1: 1, a0: 0, a1: 1 };
  function load(h, w) {
    H = h;
    T = H.time_bins;
    A = H.addr_bins;
    binUs = (H.end_us - H.start_us) / T;
    binBytes = H.axis_bytes / A;
    freq = decode(H.freq);
    age = decode(H.age);
    segs = H.segments.map((g) => ({ start: BigInt(g.start), len: g.len, off: g.off, gap: g.gap }));
    W_ = w;
    img.width = T;
    img.height = A;
    paint();
    Object.assign(view, { t0: 0, t1: T, a0: 0, a1: A });
  }
  load(D.heatmap, D.wss);
  let W = 1, Hh = 1, dpr = 1;
  let hoverUs = null;

  function fit(c) {
    const r = c.getBoundingClientRect();
    const w = Math.max(10, r.width), h = Math.max(10, r.height);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return [g, w, h];
  }
  const viewUs = () => [H.start_us + view.t0 * binUs, H.start_us + view.t1 * binUs];
  const xOfUs = (us) => ((us - H.start_us) / binUs - view.t0) / (view.t1 - view.t0) * W;
  const yOfPos = (pos) => Hh - (pos / binBytes - view.a0) / (view.a1 - view.a0) * Hh;

  function draw() {
    dpr = window.devicePixelRatio || 1;
    [, W, Hh] = fit(cv);
    ctx.clearRect(0, 0, W, Hh);
    const tw = view.t1 - view.t0, aw = view.a1 - view.a0;
    // Cells smaller than a pixel are averaged; larger ones stay crisp.
    ctx.imageSmoothingEnabled = tw > W * 1.5 || aw > Hh * 1.5;
    ctx.drawImage(img, view.t0, A - view.a1, tw, aw, 0, 0, W, Hh);
    ctx.font = '11px ' + MONO;
    ctx.textBaseline = 'middle';
    for (let i = 1; i < segs.length; i++) {
      const y = yOfPos(segs[i].off);
      if (y < 0 || y > Hh) continue;
      ctx.fillStyle = '#fff';
      ctx.fillRect(0, y - 1, W, 2);
      const label = fmtBytes(segs[i].gap) + ' gap';
      const lw = ctx.measureText(label).width + 8, ly = Math.min(Hh - 9, Math.max(9, y));
      ctx.fillStyle = 'rgba(255,255,255,0.9)';
      ctx.fillRect(W - lw - 4, ly - 8, lw, 16);
      ctx.fillStyle = '#222';
      ctx.fillText(label, W - lw, ly);
    }
    axes();
    charts();
  }

  function axes() {
    const [u0, u1] = viewUs();
    let html = '';
    for (const k of timeTicks(u0, u1, W)) {
      html += '<span style="left:' + xOfUs(k.us).toFixed(1) + 'px">' + k.label + '</span>';
    }
    taxis.innerHTML = html + '<span class="unit">time since the record\'s start (s)</span>';

    // Address ticks at round (power of two) addresses inside each segment,
    // and every segment's start; labels kept 14 px apart.
    const p0 = view.a0 * binBytes, p1 = view.a1 * binBytes;
    const step = 1n << BigInt(Math.max(0, Math.ceil(Math.log2(Math.max(1, (p1 - p0) * 44 / Hh)))));
    const ticks = [];
    segs.forEach((g, i) => {
      const s0 = Math.max(g.off, p0), s1 = Math.min(g.off + g.len, p1);
      if (s1 <= s0) return;
      if (i > 0 && g.off >= p0) ticks.push({ y: yOfPos(g.off), label: hex(g.start), seg: true });
      const end = addrIn(g, s1);
      let a = ((addrIn(g, s0) + step - 1n) / step) * step;
      for (let n = 0; a <= end && n < 400; a += step, n++) {
        ticks.push({ y: yOfPos(g.off + Number(a - g.start)), label: hex(a) });
      }
    });
    ticks.sort((x, y) => (y.seg ? 1 : 0) - (x.seg ? 1 : 0));
    const kept = [];
    for (const k of ticks) {
      if (k.y >= -1 && k.y <= Hh + 1 && kept.every((o) => Math.abs(o.y - k.y) >= 14)) kept.push(k);
    }
    aaxis.innerHTML = kept.map((k) => '<span' + (k.seg ? ' class="seg"' : '') +
      ' style="top:' + k.y.toFixed(1) + 'px">' + k.label + '</span>').join('');

    const gs = segAt(p0), ge = segAt(Math.max(p0, p1 - 1e-9));
    viewEl.textContent = secs(u0, (u1 - u0) / 100) + ' to ' + secs(u1, (u1 - u0) / 100) + ' s, ' +
      hex(addrIn(gs, p0)) + ' to ' + hex(addrIn(ge, p1)) + ' (' + fmtBytes(p1 - p0) + ' shown)';
  }

  // What the axis positions ps..pe hold, by name: the object covering
  // most of them, and how many others share them.
  function objectsIn(ps, pe) {
    const o = H.objects;
    if (!o || !o.spans.length) return null;
    const sp = o.spans, n = sp.length / 3;
    let lo = 0, hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sp[mid * 3 + 1] <= ps) lo = mid + 1; else hi = mid;
    }
    const by = new Map();
    for (let i = lo; i < n && sp[i * 3] < pe; i++) {
      const w = Math.min(pe, sp[i * 3 + 1]) - Math.max(ps, sp[i * 3]);
      if (w > 0) by.set(sp[i * 3 + 2], (by.get(sp[i * 3 + 2]) || 0) + w);
    }
    if (!by.size) return null;
    let best = -1, bw = -1;
    for (const [k, w] of by) if (w > bw) { best = k; bw = w; }
    const name = String(o.names[best]).replace(/[&<>"]/g, (ch) => '&#' + ch.charCodeAt(0) + ';');
    return '<b>' + name + '</b>' + (by.size > 1 ? ' +' + (by.size - 1) + ' more' : '');
  }

  function showReadout(x, y) {
    const t = Math.floor(view.t0 + x / W * (view.t1 - view.t0));
    const a = Math.floor(view.a1 - y / Hh * (view.a1 - view.a0));
    if (t < 0 || t >= T || a < 0 || a >= A || x < 0 || y < 0 || x > W || y > Hh) {
      hideReadout();
      return;
    }
    const c = freq[t * A + a], ac = age[t * A + a];
    const ts = H.start_us + t * binUs, ps = a * binBytes, pe = (a + 1) * binBytes;
    const g = segAt(ps);
    const across = pe > g.off + g.len + 0.5;
    const rows = [
      ['time', secs(ts, binUs / 10) + ' to ' + secs(ts + binUs, binUs / 10) + ' s'],
      ['addresses', hex(addrIn(g, ps)) + ' to ' + hex(across ? addrIn(segAt(pe), pe) : addrIn(g, pe))],
      ['size', fmtBytes(pe - ps) + (across ? ', across a collapsed gap' : '')],
    ];
    const named = objectsIn(ps, pe);
    if (named) rows.push(['object', named]);
    if (c === 0) {
      rows.push(['access', 'not monitored']);
    } else {
      rows.push(['frequency', '<b>' + (freqOf(c) * 100).toFixed(1) + '%</b> of samples']);
      rows.push(['mean age', ac ? approx(ageOf(ac)) : 'n/a']);
    }
    readout.innerHTML = rows.map((r) => '<span class="k">' + r[0] + '</span>' + r[1]).join('<br>');
    readout.hidden = false;
    const rw = readout.offsetWidth, rh = readout.offsetHeight;
    readout.style.left = (x + 16 + rw > W ? x - rw - 12 : x + 16) + 'px';
    readout.style.top = (y + 16 + rh > Hh ? Math.max(0, y - rh - 12) : y + 16) + 'px';
    hoverUs = ts + binUs / 2;
    charts();
  }
  function hideReadout() {
    readout.hidden = true;
    if (hoverUs !== null) {
      hoverUs = null;
      charts();
    }
  }

  // Zooms one axis by `f` around cell coordinate `c`, within the data.
  function zoom(lo, hi, n, c, f) {
    const span = Math.min(n, Math.max(Math.min(n, 4), (view[hi] - view[lo]) * f));
    const s = c - (c - view[lo]) * span / (view[hi] - view[lo]);
    view[lo] = Math.max(0, Math.min(n - span, s));
    view[hi] = view[lo] + span;
  }
  const local = (e) => {
    const r = cv.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  cv.addEventListener('wheel', (e) => {
    e.preventDefault();
    let d = e.deltaY || e.deltaX;
    if (e.deltaMode === 1) d *= 16;
    else if (e.deltaMode === 2) d *= 400;
    const f = Math.exp(Math.max(-1, Math.min(1, d * 0.002)));
    const [x, y] = local(e);
    const both = e.ctrlKey || e.metaKey || e.altKey;
    if (!e.shiftKey || both) zoom('t0', 't1', T, view.t0 + x / W * (view.t1 - view.t0), f);
    if (e.shiftKey || both) zoom('a0', 'a1', A, view.a1 - y / Hh * (view.a1 - view.a0), f);
    draw();
    showReadout(x, y);
  }, { passive: false });

  let drag = null;
  cv.addEventListener('mousedown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, v: Object.assign({}, view) };
    cv.classList.add('dragging');
    e.preventDefault();
  });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    const tw = drag.v.t1 - drag.v.t0, aw = drag.v.a1 - drag.v.a0;
    view.t0 = Math.max(0, Math.min(T - tw, drag.v.t0 - (e.clientX - drag.x) / W * tw));
    view.t1 = view.t0 + tw;
    view.a0 = Math.max(0, Math.min(A - aw, drag.v.a0 + (e.clientY - drag.y) / Hh * aw));
    view.a1 = view.a0 + aw;
    draw();
  });
  window.addEventListener('mouseup', () => {
    drag = null;
    cv.classList.remove('dragging');
  });
  cv.addEventListener('mousemove', (e) => {
    const [x, y] = local(e);
    showReadout(x, y);
  });
  cv.addEventListener('mouseleave', hideReadout);
  function reset() {
    Object.assign(view, { t0: 0, t1: T, a0: 0, a1: A });
    draw();
  }
  document.getElementById('reset').addEventListener('click', reset);
  cv.addEventListener('dblclick', reset);

  // Line charts over the heatmap's time view. A series: {t, y, lo?, hi?,
  // color}; null values break the line.
  function lineChart(c, series, empty) {
    const [g, w, h] = fit(c);
    const L = 78, R = 12, TOP = 8, B = 22, pw = w - L - R, ph = h - TOP - B;
    g.clearRect(0, 0, w, h);
    const [u0, u1] = viewUs();
    let ymax = 4096;
    for (const s of series) for (const v of (s.hi || s.y)) if (v !== null && v > ymax) ymax = v;
    const ys = niceBytes(ymax / 4);
    ymax = Math.ceil(ymax / ys) * ys;
    const X = (u) => L + (u - u0) / (u1 - u0) * pw, Y = (v) => TOP + ph - v / ymax * ph;
    g.font = '11px ' + MONO;
    g.lineWidth = 1;
    g.fillStyle = '#333';
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let v = 0; v <= ymax * 1.0001 && !empty; v += ys) {
      const y = Math.round(Y(v)) + 0.5;
      g.strokeStyle = '#e6e8ee';
      g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
      g.fillText(fmtBytes(v), L - 6, y);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    g.strokeStyle = '#666';
    for (const k of timeTicks(u0, u1, pw)) {
      const x = Math.round(X(k.us)) + 0.5;
      g.beginPath(); g.moveTo(x, TOP + ph); g.lineTo(x, TOP + ph + 3); g.stroke();
      g.fillText(k.label, x, TOP + ph + 5);
    }
    g.strokeStyle = '#9aa1ad';
    g.strokeRect(L + 0.5, TOP + 0.5, pw, ph);
    if (empty) {
      g.fillStyle = '#5b6475';
      g.textBaseline = 'middle';
      g.fillText(empty, L + pw / 2, TOP + ph / 2);
      return;
    }
    g.save();
    g.beginPath(); g.rect(L, TOP, pw, ph); g.clip();
    for (const s of series) {
      if (s.lo) {
        g.fillStyle = s.color + '40';
        g.beginPath();
        s.t.forEach((u, i) => g.lineTo(X(u), Y(s.hi[i])));
        for (let i = s.t.length - 1; i >= 0; i--) g.lineTo(X(s.t[i]), Y(s.lo[i]));
        g.fill();
      }
      g.strokeStyle = s.color;
      g.lineWidth = 1.5;
      g.beginPath();
      let on = false;
      s.t.forEach((u, i) => {
        const v = s.y[i];
        if (v === null) { on = false; return; }
        if (on) g.lineTo(X(u), Y(v)); else g.moveTo(X(u), Y(v));
        on = true;
      });
      g.stroke();
    }
    if (hoverUs !== null) {
      const x = Math.round(X(hoverUs)) + 0.5;
      g.strokeStyle = '#d1495b';
      g.lineWidth = 1;
      g.beginPath(); g.moveTo(x, TOP); g.lineTo(x, TOP + ph); g.stroke();
    }
    g.restore();
    c.chartX = { L, pw, u0, u1 };
  }

  const wssCv = document.getElementById('wss');
  const wssOut = document.getElementById('wss-readout');
  const PALETTE = ['#d1495b', '#2e86ab', '#e09f3e', '#3c8d5a', '#8e6c8a', '#00798c', '#6b4226'];
  function charts() {
    lineChart(wssCv, [{ t: W_.t, y: W_.mean, lo: W_.bucketed ? W_.lo : null, hi: W_.hi, color: '#3b518b' }],
      W_.t.length ? null : 'no snapshot');
    if (!D.schemes) return;
    const S = D.schemes.schemes;
    lineChart(document.getElementById('scheme-applied'),
      S.map((s, i) => ({ t: s.t, y: s.applied, color: PALETTE[i % PALETTE.length] })));
    const limited = S.some((s) => s.quota.some((q) => q !== null));
    lineChart(document.getElementById('scheme-quota'),
      S.map((s, i) => ({ t: s.t, y: s.quota, color: PALETTE[i % PALETTE.length] })),
      limited ? null : 'no size quota: every scheme is unlimited');
  }
  if (D.schemes) {
    document.getElementById('scheme-legend').innerHTML = D.schemes.schemes.map((s, i) =>
      '<span><i style="background:' + PALETTE[i % PALETTE.length] + '"></i>#' + s.index + ' ' +
      s.action.replace(/[&<>"]/g, (ch) => '&#' + ch.charCodeAt(0) + ';') + '</span>').join('');
  }
  wssCv.addEventListener('mousemove', (e) => {
    const m = wssCv.chartX;
    if (!m || !W_.t.length) return;
    const r = wssCv.getBoundingClientRect();
    const u = m.u0 + (e.clientX - r.left - m.L) / m.pw * (m.u1 - m.u0);
    let lo = 0, hi = W_.t.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (W_.t[mid] < u) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && u - W_.t[lo - 1] < W_.t[lo] - u) lo--;
    wssOut.textContent = secs(W_.t[lo], 1e4) + ' s: ' + fmtBytes(W_.mean[lo]) +
      (W_.bucketed ? ' mean, ' + fmtBytes(W_.lo[lo]) + ' to ' + fmtBytes(W_.hi[lo]) : '');
    hoverUs = W_.t[lo];
    charts();
  });
  wssCv.addEventListener('mouseleave', () => {
    wssOut.textContent = '';
    hideReadout();
  });

  const pick = document.getElementById('process');
  if (pick && D.processes) {
    pick.addEventListener('change', () => {
      const p = D.processes.list.find((x) => String(x.target_idx) === pick.value);
      if (p) load(p.heatmap, p.wss); else load(D.heatmap, D.wss);
      document.body.dataset.process = pick.value;
      hideReadout();
      draw();
    });
  }

  window.addEventListener('resize', draw);
  draw();
  document.body.dataset.ready = '1';
})();
