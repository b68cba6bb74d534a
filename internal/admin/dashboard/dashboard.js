// shoal admin dashboard: polls dashboard.json (same origin) every second,
// turns consecutive snapshots into rates, and draws the last two minutes as
// inline SVG. No framework, no external asset (see dashboard.go).
'use strict';

// ?every=MS polls faster or slower than once a second (200 ms at least).
const POLL_MS = Math.max(200, Number(new URLSearchParams(location.search).get('every')) || 1000);
const KEEP = 120; // samples per series: two minutes at one a second
const SVG = 'http://www.w3.org/2000/svg';

let prev = null;         // the previous snapshot
const hist = {};         // series name → array of numbers (null = no value)

const $ = (id) => document.getElementById(id);

function push(name, v) {
  const a = hist[name] || (hist[name] = []);
  a.push(v);
  if (a.length > KEEP) a.shift();
  return a;
}

// fmt formats a counter exactly (the test compares it with /stats), a rate
// with a sensible number of decimals.
const int = (n) => Math.round(n).toLocaleString('en-US');
function rate(x) {
  if (x == null || !isFinite(x)) return '–';
  return x >= 100 ? int(x) : x.toFixed(x >= 10 ? 1 : 2);
}
const pct = (x) => (x == null || !isFinite(x)) ? '–' : (100 * x).toFixed(1) + '%';
function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}

// spark draws series (arrays of numbers) as polylines in svg, scaled to a
// shared maximum and stretched over the samples there are; class names pick
// the colours (dashboard.css).
function spark(svg, series, classes) {
  const w = 120, h = 30;
  let max = 0;
  for (const s of series) for (const v of s) if (v != null && v > max) max = v;
  if (max <= 0) max = 1;
  while (svg.childNodes.length > series.length) svg.lastChild.remove();
  series.forEach((s, k) => {
    let line = svg.childNodes[k];
    if (!line) { line = document.createElementNS(SVG, 'polyline'); svg.appendChild(line); }
    const pts = [];
    s.forEach((v, i) => {
      if (v == null) return;
      const x = s.length > 1 ? i * w / (s.length - 1) : w;
      pts.push(x.toFixed(1) + ',' + (h - 1 - (v / max) * (h - 2)).toFixed(1));
    });
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('class', classes ? classes[k] : 'line');
  });
}

function cell(tr, cls, text, key) {
  let td = tr.querySelector('.' + cls);
  if (!td) { td = document.createElement('td'); td.className = cls; tr.appendChild(td); }
  if (key) td.dataset.k = key;
  if (td.textContent !== text) td.textContent = text;
  return td;
}

// kv fills a two-column table with rows [label, value, key]; the key (the
// figure's path in dashboard.json) goes to data-k for tests and tooltips.
function kv(table, rows) {
  const body = table.tBodies[0];
  while (body.rows.length > rows.length) body.deleteRow(-1);
  rows.forEach(([label, value, key], i) => {
    const tr = body.rows[i] || body.insertRow();
    cell(tr, 'k', label);
    const td = cell(tr, 'v', value, key);
    td.title = key || '';
  });
}

function nodes(snap, dt) {
  const body = $('nodes').tBodies[0];
  const seen = new Set();
  const lines = [], classes = [];
  for (const n of snap.nodes) {
    seen.add(String(n.index));
    let tr = body.querySelector('tr[data-node="' + n.index + '"]');
    if (!tr) {
      tr = body.insertRow();
      tr.dataset.node = n.index;
      for (const c of ['idx', 'url', 'health', 'weight n', 'active n', 'load n', 'hit n', 'rps n', 'lat n', 'reqs n', 'chart']) {
        const td = document.createElement('td');
        td.className = c;
        tr.appendChild(td);
      }
      const svg = document.createElementNS(SVG, 'svg');
      svg.setAttribute('viewBox', '0 0 120 30');
      svg.setAttribute('preserveAspectRatio', 'none');
      svg.setAttribute('class', 'spark');
      tr.querySelector('.chart').appendChild(svg);
    }
    const p = prev && prev.nodes.find((o) => o.index === n.index);
    let rps = null, lat = null;
    if (p && dt > 0) {
      rps = (n.requests - p.requests) / dt;
      const dn = n.latency_count - p.latency_count;
      lat = dn > 0 ? 1000 * (n.latency_sum - p.latency_sum) / dn : null;
    }
    const k = 'nodes.' + n.index + '.';
    cell(tr, 'idx', String(n.index)).classList.add('c' + (n.index % 8));
    cell(tr, 'url', n.url);
    const h = cell(tr, 'health', n.up ? 'up' : 'down', k + 'up');
    h.dataset.up = n.up;
    cell(tr, 'weight', String(n.weight), k + 'weight');
    cell(tr, 'active', String(n.active), k + 'active');
    cell(tr, 'load', rate(n.load), k + 'load');
    cell(tr, 'hit', pct(n.hit_ratio), k + 'hit_ratio');
    cell(tr, 'rps', rate(rps));
    cell(tr, 'lat', lat == null ? '–' : lat.toFixed(2));
    cell(tr, 'reqs', int(n.requests), k + 'requests');
    const series = push('node' + n.index, rps);
    push('nodelat' + n.index, lat);
    spark(tr.querySelector('svg'), [series], ['c' + (n.index % 8)]);
    lines.push(series);
    classes.push('c' + (n.index % 8));
  }
  for (const tr of [...body.rows]) if (!seen.has(tr.dataset.node)) tr.remove();
  spark($('nodes-chart'), lines, classes);
}

// cdn shows a PoP's content figures (dashboard.json's cdn, absent unless
// the admin API serves a PoP): counters exactly, with the hit ratio and the
// origin's byte rate over the last interval.
function cdn(snap, dt) {
  const c = snap.cdn;
  $('cdn').hidden = !c;
  if (!c) return;
  const n = c.counts || {}, p = (prev && prev.cdn && prev.cdn.counts) || null;
  const per = (k) => (p && dt > 0) ? ((n[k] || 0) - (p[k] || 0)) / dt : null;
  const v = (k) => int(n[k] || 0);
  const served = (n.hits || 0) + (n.misses || 0) + (n.revalidated || 0) + (n.stale || 0);
  $('cdn-pop').textContent = c.pop;
  kv($('cdn-cache'), [
    ['hit ratio', pct(served ? ((n.hits || 0) + (n.stale || 0)) / served : null), ''],
    ['hits', v('hits'), 'cdn.counts.hits'],
    ['misses', v('misses'), 'cdn.counts.misses'],
    ['revalidated', v('revalidated'), 'cdn.counts.revalidated'],
    ['stale served', v('stale'), 'cdn.counts.stale'],
    ['bytes from origin', bytes(n.origin_bytes || 0), 'cdn.counts.origin_bytes'],
    ['origin bytes/s', per('origin_bytes') == null ? '–' : bytes(per('origin_bytes')) + '/s', ''],
  ]);
  kv($('cdn-chain'), ['remote_fetches', 'shield_fetches', 'origin_fetches', 'shield_served', 'redirects', 'tombstoned', 'peer_errors', 'origin_errors']
    .map((k) => [k.replace(/_/g, ' '), v(k), 'cdn.counts.' + k]));
  kv($('cdn-dir'), ['stored', 'evictions', 'registrations', 'handed_over', 'pushes_sent', 'pushes_received', 'purges', 'purged_objects', 'purge_syncs']
    .map((k) => [k.replace(/_/g, ' '), v(k), 'cdn.counts.' + k]));
  const body = $('cdn-pops').tBodies[0];
  while (body.rows.length > c.pops.length) body.deleteRow(-1);
  c.pops.forEach((q, i) => {
    const tr = body.rows[i] || body.insertRow();
    cell(tr, 'name', q.name + (q.self ? ' (this PoP)' : ''));
    cell(tr, 'health', q.alive ? 'alive' : 'dead').dataset.up = q.alive;
    cell(tr, 'score', q.score.toFixed(3)).classList.add('n');
    cell(tr, 'rtt', q.self ? '–' : q.rtt_ms.toFixed(1)).classList.add('n');
  });
}

function render(snap) {
  const st = snap.stats || {};
  const dt = prev ? (snap.time - prev.time) / 1000 : 0;
  const ps = (prev && prev.stats) || null;
  const per = (f) => (ps && dt > 0) ? (f(st) - f(ps)) / dt : null;

  $('policy').textContent = snap.policy;
  const rps = per((s) => s.requests);
  // Mean latency over the interval, from the per-node histogram totals.
  let dn = 0, dsum = 0, hits = 0, reqs = 0;
  for (const n of snap.nodes) {
    const p = prev && prev.nodes.find((o) => o.index === n.index);
    if (p) { dn += n.latency_count - p.latency_count; dsum += n.latency_sum - p.latency_sum; }
    hits += n.hit_ratio * n.requests; reqs += n.requests;
  }
  const lat = dn > 0 ? 1000 * dsum / dn : null;
  const hit = reqs > 0 ? hits / reqs : null;
  const errs = per((s) => (s.status || {})['5xx'] || 0);
  $('rps').textContent = rate(rps);
  $('latency').textContent = lat == null ? '–' : lat.toFixed(2);
  $('hit').textContent = pct(hit);
  $('conns').textContent = st.conns_active == null ? '–' : int(st.conns_active);
  $('errs').textContent = rate(errs);
  $('requests').textContent = st.requests == null ? '–' : int(st.requests);
  spark($('rps-chart'), [push('rps', rps)]);
  spark($('latency-chart'), [push('lat', lat)]);
  spark($('hit-chart'), [push('hit', hit)]);
  spark($('conns-chart'), [push('conns', st.conns_active)]);
  spark($('errs-chart'), [push('errs', errs)], ['bad']);
  nodes(snap, dt);
  cdn(snap, dt);

  const total = Object.values(st.paths || {}).reduce((a, b) => a + b, 0);
  kv($('paths'), Object.keys(st.paths || {}).sort().map((p) =>
    [p + (total ? ' (' + pct(st.paths[p] / total) + ')' : ''), int(st.paths[p]), 'stats.paths.' + p]));
  kv($('protocols'), protocols(st.protocols || {}));
  kv($('status'), Object.keys(st.status || {}).sort().map((c) => [c, int(st.status[c]), 'stats.status.' + c]));
  kv($('decisions'), ['node', 'handoff', 'none'].map((d) => [d, int(snap.decisions[d] || 0), 'decisions.' + d]));
  // The main handoff counters always, the rarer ones once they are not 0.
  const ho = [], h = st.handoff || {};
  const always = ['passed', 'fallback_no_socket', 'fallback_send', 'returned'];
  for (const [k, v] of Object.entries(h)) {
    if (typeof v === 'number' && k !== 'front_cpu_percent' && (v || always.includes(k))) {
      ho.push([k.replace(/_/g, ' '), int(v), 'stats.handoff.' + k]);
    }
  }
  for (const [k, v] of Object.entries(h.hybrid || {})) if (v) ho.push(['hybrid: ' + k, int(v), 'stats.handoff.hybrid.' + k]);
  for (const [k, v] of Object.entries(st.repair || {})) {
    if (v || k === 'moved') ho.push(['repair: ' + k.replace(/_/g, ' '), int(v), 'stats.repair.' + k]);
  }
  ho.push(['retries', int(st.retries || 0), 'stats.retries']);
  kv($('handoff'), ho);
  kv($('front'), [
    ['connections open', int(st.conns_active || 0), 'stats.conns_active'],
    ['connections accepted', int(st.conns_accepted || 0), 'stats.conns_accepted'],
    ['bytes in', bytes(st.bytes_in || 0), 'stats.bytes_in'],
    ['bytes out', bytes(st.bytes_out || 0), 'stats.bytes_out'],
    ['queued', int(st.queued || 0), 'stats.queued'],
    ['queue timeouts', int(st.queue_timeouts || 0), 'stats.queue_timeouts'],
    ['queue full', int(st.queue_full || 0), 'stats.queue_full'],
    ['node dials', int(st.node_dials || 0), 'stats.node_dials'],
    ['front 4xx / 5xx', int(st.sent_4xx || 0) + ' / ' + int(st.sent_5xx || 0), ''],
    // Why the front answered itself: each reason once it happened.
    ...Object.entries(st.answers || {}).filter(([, v]) => v).sort().map(([k, v]) =>
      ['  ' + k.replace(/_/g, ' '), int(v), 'stats.answers.' + k]),
  ]);
  prev = snap;
}

// protocols lists requests by the protocol clients spoke, with shares,
// then HTTP/2 and HTTP/3 connections and the PROXY headers once not 0.
function protocols(p) {
  const req = p.requests || {};
  const total = Object.values(req).reduce((a, b) => a + b, 0);
  const rows = ['h1', 'h2', 'h3'].map((k) =>
    [k + (total ? ' (' + pct((req[k] || 0) / total) + ')' : ''), int(req[k] || 0), 'stats.protocols.requests.' + k]);
  for (const [k, v] of Object.entries(p.connections || {})) {
    if (v) rows.push([k + ' connections', int(v), 'stats.protocols.connections.' + k]);
  }
  for (const [k, v] of Object.entries(p.http2 || {})) {
    if (v) rows.push(['h2 ' + k.replace(/_/g, ' '), int(v), 'stats.protocols.http2.' + k]);
  }
  for (const [k, v] of Object.entries(p.proxy || {})) {
    if (v) rows.push(['PROXY ' + k, int(v), 'stats.protocols.proxy.' + k]);
  }
  return rows;
}

function live(state, text) {
  const el = $('live');
  el.dataset.state = state;
  el.textContent = text;
}

async function tick() {
  try {
    const r = await fetch('dashboard.json', { cache: 'no-store', credentials: 'same-origin' });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.status + ' ' + r.statusText);
    render(body);
    live('ok', 'live · ' + new Date(body.time).toLocaleTimeString());
  } catch (e) {
    live('err', 'no data: ' + e.message);
  } finally {
    setTimeout(tick, POLL_MS);
  }
}

tick();
