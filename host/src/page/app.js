// wasmsched operator page: hash routes over the host's JSON API, live updates from /api/events.
// No framework, no build step. Untrusted text only ever goes in through text nodes.
(() => {
  'use strict';

  const TOKEN_KEY = 'wasmsched-token';
  const PAGE_SIZE = 50;
  const DECISIONS_LIMIT = 100;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const $ = (sel, root = document) => root.querySelector(sel);

  // ---------------------------------------------------------------- DOM helpers

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false || c === '') continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function build(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    return el;
  }

  /** An HTML element: h('a', { href: '#/x' }, 'text', child, [more]). */
  function h(tag, attrs, ...children) {
    return append(build(document.createElement(tag), attrs), children);
  }

  /** An SVG element. */
  function s(tag, attrs, ...children) {
    return append(build(document.createElementNS(SVG_NS, tag), attrs), children);
  }

  // ---------------------------------------------------------------- formatting

  const plain = n => (n === null || n === undefined || Number.isNaN(n) ? '—' : String(Math.round(n)));
  const pct = p => (p === null || p === undefined ? '—' : `${Math.round(p)} %`);
  const rate = r => (r === null || r === undefined || !Number.isFinite(r) ? '—' : `${(r * 100).toFixed(1)} %`);
  const share = x => (x === null || x === undefined ? '—' : String(Math.round(x * 10) / 10));
  const signed = x => (x > 0 ? `+${share(x)}` : share(x));
  const sha12 = v => (v ? v.slice(0, 12) : '—');
  const plural = (n, one, many = `${one}s`) => `${plain(n)} ${n === 1 ? one : many}`;

  /** A duration in words: "40 s", "3 m 20 s", "2 h 5 m", "1 d 4 h". */
  function dur(ms) {
    if (ms === null || ms === undefined) return '—';
    let t = Math.max(0, Math.round(ms / 1000));
    const d = Math.floor(t / 86400); t -= d * 86400;
    const hh = Math.floor(t / 3600); t -= hh * 3600;
    const m = Math.floor(t / 60); const sec = t - m * 60;
    const two = (a, ua, b, ub) => (b ? `${a} ${ua} ${b} ${ub}` : `${a} ${ua}`);
    if (d) return two(d, 'd', hh, 'h');
    if (hh) return two(hh, 'h', m, 'm');
    if (m) return two(m, 'm', sec, 's');
    return `${sec} s`;
  }

  /** The backend's clock (ms from the run's start) as h:mm:ss. */
  function clock(ms) {
    if (ms === null || ms === undefined) return '—';
    const t = Math.max(0, Math.floor(ms / 1000));
    const p = n => String(n).padStart(2, '0');
    return `${Math.floor(t / 3600)}:${p(Math.floor(t / 60) % 60)}:${p(t % 60)}`;
  }

  const wallTime = ms => (ms ? new Date(ms).toLocaleTimeString() : '—');

  // ---------------------------------------------------------------- the API

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function getToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  }
  function setToken(t) {
    try { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); } catch { /* private mode */ }
    $('#sign-out').hidden = !t;
  }
  function authHeaders(extra) {
    const t = getToken();
    return Object.assign(t ? { Authorization: `Bearer ${t}` } : {}, extra || {});
  }

  async function request(path, opts = {}) {
    let res;
    try {
      res = await fetch(path, { ...opts, headers: authHeaders(opts.headers), cache: 'no-store', credentials: 'same-origin' });
    } catch (e) {
      throw new HttpError(0, `The host does not answer (${e.message}).`);
    }
    if (!res.ok) {
      const text = (await res.text().catch(() => '')).trim();
      throw new HttpError(res.status, text || `${res.status} ${res.statusText}`);
    }
    return res;
  }

  const getJSON = async path => (await request(path, { headers: { Accept: 'application/json' } })).json();

  /** A query string of the non-empty values. */
  function qs(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
    const str = q.toString();
    return str ? `?${str}` : '';
  }

  // ---------------------------------------------------------------- routes

  const PAGES = {}; // filled in below: overview, queue, tenants, decisions, job, shadows

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query = ''] = raw.split('?');
    const parts = path.split('/').filter(Boolean);
    const params = Object.fromEntries(new URLSearchParams(query));
    if (parts[0] === 'jobs' && /^\d+$/.test(parts[1] || '')) return { page: 'job', id: parts[1], params };
    const page = ['queue', 'tenants', 'decisions', 'shadows'].includes(parts[0]) ? parts[0] : 'overview';
    return { page, id: null, params };
  }

  function hashFor(route) {
    const base = route.page === 'job' ? `#/jobs/${route.id}` : `#/${route.page}`;
    return base + qs(route.params);
  }

  /** Change some of the current route's parameters (filters, paging): a new hash, same page. */
  function setParams(patch) {
    const params = { ...app.route.params, ...patch };
    for (const k of Object.keys(params)) if (params[k] === '' || params[k] === null || params[k] === undefined) delete params[k];
    location.hash = hashFor({ ...app.route, params });
  }

  // ---------------------------------------------------------------- the view and its updates

  const app = {
    route: null, gen: 0, loading: false, again: false, eventWaiting: false,
    ctrl: null, content: null, status: null, h1: null, data: null, local: {}, width: 0,
  };
  const view = () => $('#view');

  function showError(msg) { if ($('#error').textContent !== msg) $('#error').textContent = msg; }
  function clearError() { if ($('#error').textContent) $('#error').textContent = ''; }

  function updateNav(route) {
    for (const a of document.querySelectorAll('nav a[data-page]')) {
      if (a.dataset.page === route.page) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  /** A new route: a fresh page shell (heading, filters, status line, content), then its data. */
  function navigate(route, { focus }) {
    app.gen++;
    app.loading = false;
    app.again = false;
    app.route = route;
    app.data = null;
    app.local = {};
    const page = PAGES[route.page];
    const v = view();
    v.removeAttribute('data-ready');
    v.dataset.page = route.page;
    updateNav(route);
    app.h1 = h('h1', { tabindex: '-1', id: 'title' }, page.title(route));
    app.ctrl = page.controls ? page.controls(route) : null;
    app.status = h('p', { class: 'action-status', role: 'status', id: 'action-status' });
    app.content = h('div', { class: 'content', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading…'));
    v.replaceChildren(...[app.h1, app.ctrl && app.ctrl.el, app.status, app.content].filter(Boolean));
    document.title = `${page.title(route)} · wasmsched`;
    if (focus) app.h1.focus();
    load('route');
  }

  /** Same page, other filters or page of rows: keep the shell, reload the data. */
  function softNavigate(route) {
    app.gen++;
    app.loading = false;
    app.again = false;
    app.route = route;
    view().removeAttribute('data-ready');
    if (app.ctrl && app.ctrl.sync) app.ctrl.sync(app.data, route);
    load('filter');
  }

  async function load(cause) {
    if (cause === 'event') app.eventWaiting = true;
    if (app.loading) { app.again = true; return; }
    const gen = app.gen;
    const route = app.route;
    const byEvent = app.eventWaiting;
    app.eventWaiting = false;
    app.loading = true;
    try {
      const data = await PAGES[route.page].load(route);
      if (gen !== app.gen) return;
      app.data = data;
      renderPage();
      view().dataset.ready = 'true';
      clearError();
      if (byEvent) document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    } catch (e) {
      if (gen === app.gen) failed(e, route);
    } finally {
      if (gen === app.gen) {
        app.loading = false;
        if (app.again) { app.again = false; load('again'); }
      }
    }
  }

  function failed(e, route) {
    if (e.status === 401) return showTokenForm();
    if (e.status === 404 && route.page === 'job') {
      swapContent([h('p', { class: 'notice' }, `The host has never seen job ${route.id}, or has forgotten it.`)]);
      view().dataset.ready = 'true';
      return;
    }
    showError(e.status ? `The host answered ${e.status}: ${e.message}` : e.message || String(e));
    if (!app.data) swapContent([h('p', { class: 'muted' }, 'Could not load this page; it will try again on the next tick.')]);
  }

  /** Render the current page from app.data into the content, in place. */
  function renderPage() {
    const page = PAGES[app.route.page];
    app.width = app.content.clientWidth || view().clientWidth || 900;
    if (app.ctrl && app.ctrl.sync) app.ctrl.sync(app.data, app.route);
    swapContent([page.render(app.data, app.route)]);
  }

  /** What identifies an element across re-renders, for focus, scroll and <details> state. */
  function keyOf(el) {
    return el.dataset.key || `${el.tagName}|${el.getAttribute('href') || ''}|${el.textContent.trim().slice(0, 80)}`;
  }

  function swapContent(nodes) {
    const c = app.content;
    const active = document.activeElement;
    const focusKey = active && active !== c && c.contains(active) ? keyOf(active) : null;
    const scrolls = new Map([...c.querySelectorAll('[data-key]')].filter(el => el.scrollLeft).map(el => [keyOf(el), el.scrollLeft]));
    const open = new Set([...c.querySelectorAll('details[open]')].map(keyOf));
    const x = window.scrollX;
    const y = window.scrollY;
    c.replaceChildren(...nodes);
    c.removeAttribute('aria-busy');
    for (const d of c.querySelectorAll('details')) if (open.has(keyOf(d))) d.open = true;
    for (const el of c.querySelectorAll('[data-key]')) if (scrolls.has(keyOf(el))) el.scrollLeft = scrolls.get(keyOf(el));
    if (focusKey) {
      const again = [...c.querySelectorAll('a, button, select, input, summary, [tabindex]')].find(el => keyOf(el) === focusKey);
      if (again) again.focus({ preventScroll: true });
    }
    markScrollable(c);
    if (window.scrollY !== y || window.scrollX !== x) window.scrollTo(x, y);
  }

  /** Wide tables scroll inside their wrapper; make such a wrapper reachable by keyboard. */
  function markScrollable(root) {
    for (const w of root.querySelectorAll('.table-wrap')) {
      if (w.scrollWidth > w.clientWidth + 1) {
        build(w, { tabindex: '0', role: 'region', 'aria-label': w.querySelector('caption').textContent });
      } else {
        for (const a of ['tabindex', 'role', 'aria-label']) w.removeAttribute(a);
      }
    }
  }

  // ---------------------------------------------------------------- signing in

  function showTokenForm() {
    stopEvents();
    setLive('signed out');
    app.gen++;
    app.loading = false;
    view().removeAttribute('data-ready');
    if ($('#token-form')) return;
    const had = Boolean(getToken());
    const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
    const form = h('form', { id: 'token-form', class: 'panel token-form' },
      h('p', {}, had ? 'The host refused the token. Enter it again.' : 'This host needs a token to show its data.'),
      h('div', { class: 'field' }, h('label', { for: 'token' }, 'Token'), input),
      h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
    form.addEventListener('submit', ev => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      setToken(t);
      clearError();
      navigate(parseHash(), { focus: true });
      loadHeader();
      startEvents();
    });
    const title = h('h1', { tabindex: '-1', id: 'title' }, 'Sign in');
    view().replaceChildren(title, form);
    app.content = h('div');
    input.focus();
  }

  function signOut() {
    setToken('');
    stopEvents();
    navigate(parseHash(), { focus: true });
    startEvents();
  }

  // ---------------------------------------------------------------- header

  function setHeader(st) {
    if (!st) return;
    $('#backend').textContent = st.speed ? `${st.backend} at ${st.speed} speed` : st.backend;
    if (st.running === false) { live.running = false; setLive('stopped'); }
  }

  async function loadHeader() {
    try { setHeader(await getJSON('/status')); } catch { /* the view shows what went wrong */ }
  }

  // ---------------------------------------------------------------- live events (fetch + SSE parsing)

  const live = { on: false, ctl: null, timer: 0, tries: 0, running: null, state: '' };

  function setLive(state) {
    if (live.state === state) return;
    live.state = state;
    $('#live').dataset.state = state;
    $('#live-text').textContent = state;
  }

  function startEvents() {
    stopEvents();
    live.on = true;
    connect();
  }

  function stopEvents() {
    live.on = false;
    clearTimeout(live.timer);
    if (live.ctl) live.ctl.abort();
    live.ctl = null;
  }

  async function connect() {
    if (!live.on) return;
    const ctl = new AbortController();
    live.ctl = ctl;
    try {
      const res = await fetch('api/events', { headers: authHeaders({ Accept: 'text/event-stream' }), signal: ctl.signal, cache: 'no-store' });
      if (res.status === 401) { showTokenForm(); return; }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setLive(live.running === false ? 'stopped' : 'live');
      await readEvents(res.body, onEvent);
    } catch {
      if (ctl.signal.aborted) return;
    }
    if (!live.on || ctl !== live.ctl) return;
    setLive(live.running === false ? 'stopped' : 'reconnecting');
    const delay = Math.min(10, 2 ** live.tries) * 1000; // 1 s, 2 s, 4 s, 8 s, 10 s, 10 s, …
    live.tries++;
    live.timer = setTimeout(connect, delay);
  }

  /** Read a text/event-stream body, calling dispatch(name, data) per event. */
  async function readEvents(body, dispatch) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let name = '';
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) dispatch(name || 'message', data.join('\n'));
          name = '';
          data = [];
        } else if (line[0] !== ':') {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val[0] === ' ') val = val.slice(1);
          if (field === 'event') name = val;
          else if (field === 'data') data.push(val);
        }
      }
    }
  }

  function onEvent(name, data) {
    if (name !== 'tick') return;
    let t;
    try { t = JSON.parse(data); } catch { return; }
    live.tries = 0;
    live.running = t.running !== false;
    document.body.dataset.tick = String(t.ticks);
    $('#tick').textContent = `tick ${t.ticks} · ${clock(t.time_ms)}`;
    setLive(live.running ? 'live' : 'stopped');
    if (app.route && !$('#token-form')) load('event');
  }

  // ---------------------------------------------------------------- shared pieces

  /** A number a test may read: textContent is exactly the plain number. */
  const field = (name, n) => h('span', { 'data-field': name }, plain(n));

  function cards(list) {
    return h('dl', { class: 'cards' }, list.filter(Boolean).map(([label, value, sub, tone]) =>
      h('div', { class: `card${tone ? ` tone-${tone}` : ''}` },
        h('dt', {}, label), h('dd', { class: 'value' }, value), sub ? h('dd', { class: 'sub' }, sub) : null)));
  }

  function facts(pairs, cls) {
    return h('dl', { class: cls || 'facts' }, pairs.filter(Boolean).map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))));
  }

  function badge(text, tone) { return h('span', { class: `badge tone-${tone || 'neutral'}` }, text); }

  const OUTCOME_TONE = { applied: 'good', refused: 'bad', 'over-budget': 'warn', 'not-applied': 'bad', rescued: 'info', fallback: 'neutral' };
  const STATE_TONE = { serving: 'good', quarantined: 'warn', benched: 'bad', absent: 'neutral' };

  /** A utilisation bar and its number. */
  function usage(percent) {
    const fill = h('span', { class: 'fill' });
    fill.style.width = `${Math.max(0, Math.min(100, percent || 0))}%`;
    return h('span', { class: 'usage' }, h('span', { class: 'bar', 'aria-hidden': 'true' }, fill), h('span', {}, pct(percent)));
  }

  /**
   * A table in a horizontal scroller. cols: [{ label, cell(row), field?, num?, head? }]:
   * `field` names the cell for tests, `head` makes the cell the row's header.
   */
  function table({ caption, cols, rows, rowAttrs, empty, key }) {
    const head = h('thead', {}, h('tr', {}, cols.map(c => h('th', { scope: 'col', class: c.num ? 'num' : null }, c.label))));
    const body = rows.length
      ? rows.map(r => h('tr', rowAttrs ? rowAttrs(r) : {}, cols.map(c => h(c.head ? 'th' : 'td', {
        scope: c.head ? 'row' : null, class: c.num ? 'num' : c.cls || null, 'data-field': c.field || null,
      }, c.cell(r)))))
      : h('tr', {}, h('td', { colspan: cols.length, class: 'empty' }, empty || 'Nothing to show.'));
    return h('div', { class: 'table-wrap', 'data-key': `table:${key || caption}` },
      h('table', {}, h('caption', {}, caption), head, h('tbody', {}, body)));
  }

  function pager({ total, offset, limit, what }) {
    const first = total ? offset + 1 : 0;
    const last = Math.min(total, offset + limit);
    return h('div', { class: 'pager' },
      h('p', { class: 'muted' }, total ? `${what} ${first}–${last} of ${total}` : `No ${what.toLowerCase()}`),
      h('div', { class: 'buttons' },
        h('button', { type: 'button', 'data-key': 'prev', disabled: offset <= 0, onclick: () => setParams({ offset: Math.max(0, offset - limit) || '' }) }, 'Previous'),
        h('button', { type: 'button', 'data-key': 'next', disabled: last >= total, onclick: () => setParams({ offset: offset + limit }) }, 'Next')));
  }

  function section(title, ...children) {
    return h('section', { class: 'panel', 'aria-label': title }, h('h2', {}, title), children);
  }

  const jobLink = (id, name) => (id === null || id === undefined ? '—' : h('a', { href: `#/jobs/${id}` }, name || `job ${id}`));

  /** A <label> and a <select>, its options set by setOptions(). */
  function selectField(id, label, onchange) {
    const sel = h('select', { id, name: id });
    sel.addEventListener('change', () => onchange(sel.value));
    return { el: h('div', { class: 'field' }, h('label', { for: id }, label), sel), sel };
  }

  /** Replace a select's options when they changed, unless the user is on it. */
  function setOptions(sel, values, current, allLabel) {
    const want = [...new Set([...(values || []), ...(current ? [current] : [])])];
    const have = [...sel.options].slice(allLabel ? 1 : 0).map(o => o.value);
    const missingAll = allLabel && (!sel.options.length || sel.options[0].value !== '');
    if (document.activeElement !== sel && (missingAll || want.join('\u0000') !== have.join('\u0000'))) {
      sel.replaceChildren();
      append(sel, [allLabel ? h('option', { value: '' }, allLabel) : null, want.map(v => h('option', { value: v }, v))]);
    }
    if (document.activeElement !== sel) sel.value = current || '';
  }

  // ---------------------------------------------------------------- charts

  const PALETTE = 8;

  function niceStep(span, count) {
    const raw = span / Math.max(1, count);
    const mag = 10 ** Math.floor(Math.log10(raw));
    const n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
  }

  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

  /**
   * A line chart. series: [{ name, points: [[x, y]], color, dashed }]; x is the backend's clock (ms).
   * Returns an <svg role="img"> with a <title> and an aria-label summary.
   */
  function lineChart({ title, label, series, yFormat = share, yMin = 0, yMax, height }) {
    const W = Math.max(240, Math.floor((app.width || 600) - 34)); // charts sit in a panel (padding, border)
    const H = height || (W < 500 ? 200 : 260);
    const svg = s('svg', { role: 'img', 'aria-label': label, viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart' }, s('title', {}, title));
    const pts = series.flatMap(x => x.points);
    if (!pts.length) {
      svg.append(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'axis-text' }, 'No data yet'));
      return svg;
    }
    let x0 = Math.min(...pts.map(p => p[0]));
    let x1 = Math.max(...pts.map(p => p[0]));
    if (x1 === x0) { x0 -= 1000; x1 += 1000; }
    let y0 = Math.min(yMin, ...pts.map(p => p[1]));
    let y1 = yMax !== undefined ? yMax : Math.max(...pts.map(p => p[1]));
    if (y1 <= y0) y1 = y0 + 1;
    const step = niceStep(y1 - y0, H < 220 ? 4 : 5);
    y0 = Math.floor(y0 / step) * step;
    y1 = Math.ceil(y1 / step) * step;
    const yTicks = [];
    for (let v = y0; v <= y1 + step / 2; v += step) yTicks.push(Number(v.toPrecision(12)));
    const m = { l: 12 + 7 * Math.max(...yTicks.map(v => yFormat(v).length)), r: 14, t: 10, b: 26 };
    const px = x => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
    const py = y => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
    const grid = s('g', { class: 'grid' });
    for (const v of yTicks) {
      grid.append(s('line', { x1: m.l, x2: W - m.r, y1: py(v), y2: py(v) }),
        s('text', { x: m.l - 6, y: py(v) + 4, 'text-anchor': 'end', class: 'axis-text' }, yFormat(v)));
    }
    const maxTicks = Math.max(2, Math.floor((W - m.l - m.r) / 80));
    const tstep = (TIME_STEPS.find(t => (x1 - x0) / (t * 1000) <= maxTicks) || 86400 * Math.ceil((x1 - x0) / 86400000 / maxTicks)) * 1000;
    for (let t = Math.ceil(x0 / tstep) * tstep; t <= x1; t += tstep) {
      grid.append(s('line', { x1: px(t), x2: px(t), y1: H - m.b, y2: H - m.b + 4 }),
        s('text', { x: px(t), y: H - 8, 'text-anchor': 'middle', class: 'axis-text' }, clock(t)));
    }
    grid.append(s('line', { class: 'axis', x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b }));
    svg.append(grid);
    for (const ser of series) {
      const cls = `line c${ser.color % PALETTE}${ser.dashed ? ' dashed' : ''}`;
      if (ser.points.length === 1) {
        const [x, y] = ser.points[0];
        svg.append(s('circle', { cx: px(x), cy: py(y), r: 3, class: `${cls} dot` }));
      } else if (ser.points.length) {
        const d = ser.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
        svg.append(s('polyline', { points: d, fill: 'none', class: cls, 'stroke-dasharray': ser.dashed ? '6 4' : null }));
      }
    }
    return svg;
  }

  function legend(items) {
    return h('ul', { class: 'legend' }, items.map(({ text, color, dashed, pair }) => h('li', {},
      s('svg', { width: pair ? 44 : 22, height: 10, 'aria-hidden': 'true', class: 'swatch' },
        s('line', { x1: 1, x2: 20, y1: 5, y2: 5, class: `line c${color % PALETTE}${dashed ? ' dashed' : ''}`, 'stroke-dasharray': dashed ? '4 3' : null }),
        pair ? s('line', { x1: 24, x2: 43, y1: 5, y2: 5, class: `line c${color % PALETTE} dashed`, 'stroke-dasharray': '4 3' }) : null),
      text)));
  }

  /** Up to `n` evenly spread items of a long list, the last always included. */
  function sample(list, n) {
    if (list.length <= n) return list;
    const out = [];
    for (let i = 0; i < n; i++) out.push(list[Math.round((i * (list.length - 1)) / (n - 1))]);
    return out;
  }

  function dataTable(key, caption, cols, rows) {
    return h('details', { class: 'data', 'data-key': `details:${key}` },
      h('summary', { 'data-key': `summary:${key}` }, 'Show the data as a table'),
      table({ caption, cols, rows, key }));
  }

  // ---------------------------------------------------------------- overview

  function renderOverview(d, route) {
    const st = d.status || {};
    const n = d.nodes || {};
    setHeader(st);
    const b = d.budget || {};
    const wd = st.watchdog;
    const actions = Boolean(d.actions);

    const summary = cards([
      ['Jobs running', field('jobs-running', st.jobs_running), h('a', { href: '#/tenants' }, 'By tenant')],
      ['Jobs queued', field('jobs-queued', st.jobs_queued), h('a', { href: '#/queue' }, 'See the queue')],
      ['Nodes', field('nodes-total', n.total), n.down ? `${n.down} down` : 'all up', n.down ? 'warn' : null],
      ['GPUs', field('gpus-total', n.gpus), `${plain(n.gpus_used)} in use · ${pct(n.utilisation_percent)}`],
      ['Ticks', field('ticks', st.ticks), `${plain(st.decisions)} decided · ${plain(st.late_ticks)} late`],
      ['Disruption budget', b.enabled ? `${plain(b.left)} left` : 'off',
        b.enabled ? `${plain(b.used_in_window)} of ${plain(b.max_per_window)} used in ${dur((b.window_s || 0) * 1000)}` : 'no limit',
        b.enabled && b.left === 0 ? 'warn' : null],
      ['Watchdog', wd ? 'benched' : 'watching', wd ? `${wd.policy} ${sha12(wd.sha256)}` : `${plain(st.watchdog_benchings)} benched so far`, wd ? 'bad' : null],
      ['Health', d.ready === null && d.live === null ? 'ready, live' : d.ready !== null ? 'not ready' : 'not live',
        d.ready || d.live || `${(st.endpoints || []).filter(e => e.up).length} of ${(st.endpoints || []).length} endpoints up`,
        d.ready !== null || d.live !== null ? 'bad' : 'good'],
    ]);

    const byType = table({
      caption: 'GPUs by type',
      rows: n.by_type || [],
      cols: [
        { label: 'GPU type', head: true, cell: t => t.gpu_type },
        { label: 'Nodes', num: true, cell: t => plain(t.nodes) },
        { label: 'GPUs', num: true, cell: t => plain(t.gpus) },
        { label: 'In use', num: true, cell: t => plain(t.gpus_used) },
        { label: 'Utilisation', cell: t => usage(t.utilisation_percent) },
      ],
    });

    const nl = d.node_list || { total: 0, offset: 0, items: [] };
    const nodes = table({
      caption: 'Nodes',
      rows: nl.items || [],
      rowAttrs: x => ({ class: x.down ? 'row-down' : null }),
      cols: [
        { label: 'Node', head: true, cell: x => x.name },
        { label: 'GPU type', cell: x => x.gpu_type },
        { label: 'GPUs in use', num: true, cell: x => `${plain(x.gpus_used)} of ${plain(x.gpus)}` },
        { label: 'Utilisation', cell: x => usage(x.utilisation_percent) },
        { label: 'Jobs', num: true, cell: x => plain(x.jobs) },
        { label: 'State', cell: x => (x.down ? badge('down', 'bad') : badge('up', 'good')) },
      ],
    });

    const policyCols = [
      { label: 'Policy', head: true, cell: p => p.name },
      { label: 'Role', cell: p => badge(p.role, p.role === 'active' ? 'info' : 'neutral') },
      { label: 'State', cell: p => badge(p.state, STATE_TONE[p.state]) },
      { label: 'Version', num: true, cell: p => plain(p.version) },
      { label: 'sha256', cell: p => h('code', { title: p.sha256 || null }, sha12(p.sha256)) },
      { label: 'Calls', num: true, cell: p => plain((p.counters || {}).calls) },
      { label: 'Traps', num: true, cell: p => plain((p.counters || {}).traps) },
      { label: 'Fallbacks', num: true, cell: p => plain((p.counters || {}).fallbacks) },
      { label: 'Last reload', cell: p => (p.last_reload ? h('span', { title: p.last_reload.detail || null }, `${p.last_reload.outcome} at ${wallTime(p.last_reload.wall_ms)}`) : '—') },
    ];
    if (actions) {
      policyCols.push({ label: 'Action', cell: p => h('button', {
        type: 'button', 'data-key': `rollback:${p.name}`, 'aria-label': `Roll back ${p.name}`,
        title: p.previous_sha256 ? `Bring back ${sha12(p.previous_sha256)}` : 'No previous version is known',
        onclick: () => act(`rollback/${encodeURIComponent(p.name)}`, `Roll back ${p.name} to its previous version?`,
          text => describeRollback(p.name, text)),
      }, 'Roll back') });
    }
    const policies = table({ caption: 'Policies', rows: st.policies || [], cols: policyCols, empty: 'No policy is configured.' });

    return h('div', { class: 'stack' },
      summary,
      policies,
      h('div', { class: 'columns' },
        renderBackend(d, st),
        st.experiment ? renderExperiment(st.experiment, actions) : null,
        renderLoop(st, wd)),
      byType,
      h('div', {}, nodes, pager({ total: nl.total || 0, offset: nl.offset || 0, limit: PAGE_SIZE, what: 'Nodes' })));
  }

  function renderBackend(d, st) {
    const eps = st.endpoints || [];
    const l = st.leadership;
    return section('Backend',
      facts([
        ['Backend', st.backend || '—'],
        ['Ready', d.ready === null ? badge('ready', 'good') : [badge('not ready', 'bad'), ' ', d.ready]],
        ['Live', d.live === null ? badge('live', 'good') : [badge('not live', 'bad'), ' ', d.live]],
        ['Endpoints', `${eps.filter(e => e.up).length} up, ${eps.filter(e => !e.up).length} down`],
        l ? ['Leadership', [badge(l.leading ? 'leading' : 'following', l.leading ? 'good' : 'neutral'), ' ', l.identity]] : null,
        l ? ['Lead held by', l.holder || 'nobody'] : null,
        l ? ['Lease', `${l.lease} · ${plural(l.transitions, 'transition')} · taken ${plural(l.acquired, 'time')}`] : null,
      ]),
      eps.length ? [h('h3', {}, 'Endpoints'), h('ul', { class: 'endpoints' }, eps.map(e => h('li', {},
        e.up ? badge('up', 'good') : badge('down', 'bad'), ' ', h('span', { class: 'muted' }, e.kind || 'endpoint'), ' ', h('code', {}, e.name),
        e.detail ? ` — ${e.detail}` : e.up ? (e.jobs !== undefined ? ` — ${plural(e.jobs, 'job')}` : '') : e.down_for_ms ? ` — down for ${dur(e.down_for_ms)}` : '')))] : null);
  }

  /** Each arm's comparison against the baseline: the contract's `estimates` list, or one flat item. */
  function versusSentences(v) {
    const ests = Array.isArray(v.estimates) ? v.estimates : [v];
    return ests.map(e => e.sentence || `${v.arm}: ${e.estimate} ${e.change === undefined ? '' : `${e.change >= 0 ? '+' : ''}${(e.change * 100).toFixed(1)} %`}`);
  }

  function renderExperiment(x, actions) {
    const split = x.design === 'split';
    const arms = (x.arms || []).map((a, i) => h('li', {}, a, i === 0 ? ' (baseline)' : '', a === x.active || (split && !x.ended) ? [' ', badge('active', 'info')] : null));
    return section('Experiment',
      facts([
        ['Name', x.name],
        ['Design', split ? `split by a hash of each job's ${x.assign === 'tenant' ? 'tenant' : 'name'}: every arm decides for its own jobs` : 'switchback: one arm at a time'],
        split ? null : ['Active arm', x.active || (x.ended ? 'none: ended' : 'not yet')],
        ['Block', `${plain(x.block)} (${x.warm ? 'past burn-in' : 'burning in'}; ${dur((x.block_s || 0) * 1000)} blocks, ${dur((x.burn_in_s || 0) * 1000)} burn-in)`],
        ['Groups', plain(x.groups)],
        x.ended ? ['Ended', x.ended] : null,
      ]),
      h('h3', {}, 'Arms'), h('ul', { class: 'arms' }, arms),
      (x.versus || []).length ? [h('h3', {}, 'Against the baseline'), h('ul', { class: 'versus' }, x.versus.filter(v => v.change !== null).flatMap(versusSentences).map(t => h('li', {}, t)))] : null,
      actions && !x.ended ? h('button', { type: 'button', class: 'danger', 'data-key': 'stop-experiment',
        onclick: () => act('experiment/stop', `Stop the experiment ${x.name}? The configured roles serve again.`, t => t) }, 'Stop experiment') : null);
  }

  function renderLoop(st, wd) {
    const tw = st.tick_wall || {};
    return section('Loop',
      facts([
        ['Backend clock', clock(st.backend_time_ms)],
        ['Tick', `${plain(st.tick_ms)} ms (recent p50 ${plain(tw.p50_ms)} ms, p99 ${plain(tw.p99_ms)} ms, max ${plain(tw.max_ms)} ms)`],
        ['Started', st.started_wall_ms ? new Date(st.started_wall_ms).toLocaleString() : '—'],
        ['Swaps / refused files', `${plain(st.swaps)} / ${plain(st.refused)}`],
        ['Disruptions', `${plain(st.disruptions)} (${plain(st.over_budget)} over budget)`],
        ['Stall rescues', plain(st.stall_rescues)],
        ['Watchdog', wd ? `benched ${wd.policy} ${sha12(wd.sha256)} at ${clock(wd.benched_at_ms)}; ${wd.safe || 'a safe policy'} runs instead${wd.why ? ` — ${wd.why}` : ''}` : 'watching'],
      ]));
  }

  function describeRollback(name, text) {
    try {
      const r = JSON.parse(text);
      return `Rolled back ${r.policy || name}: ${sha12(r.sha256)} serves now${r.replaced ? ` (replaced ${sha12(r.replaced)})` : ''}.`;
    } catch {
      return text || `Rolled back ${name}.`;
    }
  }

  /** A POST action after a confirm(); its answer goes in the status line. */
  async function act(path, question, describe) {
    if (!window.confirm(question)) return;
    const line = app.status;
    line.textContent = 'Working…';
    try {
      const res = await request(path, { method: 'POST' });
      line.textContent = describe((await res.text()).trim());
      load('action');
    } catch (e) {
      if (e.status === 401) showTokenForm();
      else line.textContent = `Refused${e.status ? ` (${e.status})` : ''}: ${e.message}`;
    }
  }

  // ---------------------------------------------------------------- queue

  function queueControls(route) {
    const go = key => v => setParams({ [key]: v, offset: '' });
    const tenant = selectField('f-tenant', 'Tenant', go('tenant'));
    const ns = selectField('f-namespace', 'Namespace', go('namespace'));
    const sync = (data, r) => {
      setOptions(tenant.sel, data ? data.tenants : [], r.params.tenant, 'All tenants');
      setOptions(ns.sel, data ? data.namespaces : [], r.params.namespace, 'All namespaces');
    };
    sync(null, route);
    return { el: h('form', { class: 'filters', 'aria-label': 'Filter the queue', onsubmit: e => e.preventDefault() }, tenant.el, ns.el), sync };
  }

  function renderQueue(d) {
    const items = d.items || [];
    const filtered = app.route.params.tenant || app.route.params.namespace;
    return h('div', { class: 'stack' },
      table({
        caption: filtered ? 'Queued jobs (filtered)' : 'Queued jobs',
        key: 'queue',
        rows: items,
        empty: filtered ? 'No queued job matches these filters.' : 'Nothing waits.',
        rowAttrs: q => ({ 'data-job': q.job }),
        cols: [
          { label: 'Position', num: true, field: 'position', cell: q => plain(q.position) },
          { label: 'Job', head: true, field: 'name', cell: q => jobLink(q.job, q.name) },
          { label: 'Tenant', field: 'tenant', cell: q => q.tenant },
          { label: 'Namespace', cell: q => q.namespace },
          { label: 'GPUs', num: true, cell: q => plain(q.gpus) },
          { label: 'Waiting', cls: 'nowrap', cell: q => dur(q.wait_ms) },
          { label: 'State', cell: q => q.state },
          { label: 'Why it waits', field: 'reason', cls: 'reason', cell: q => q.reason },
          { label: 'Said by', field: 'reason-by', cell: q => badge(q.reason_by, q.reason_by === 'policy' ? 'info' : 'neutral') },
        ],
      }),
      pager({ total: d.total || 0, offset: d.offset || 0, limit: PAGE_SIZE, what: 'Jobs' }));
  }

  // ---------------------------------------------------------------- tenants

  function renderTenants(d) {
    const now = d.now || [];
    const hist = d.history || [];
    const names = [...new Set([...now.map(t => t.name), ...hist.flatMap(p => (p.tenants || []).map(t => t.name))])];
    const color = new Map(names.map((n, i) => [n, i]));
    const series = names.flatMap(name => {
      const held = [];
      const ent = [];
      for (const p of hist) {
        const t = (p.tenants || []).find(x => x.name === name);
        if (t) { held.push([p.time_ms, t.gpus]); ent.push([p.time_ms, t.gpus_entitled]); }
      }
      return [{ name, points: held, color: color.get(name) }, { name: `${name} entitled`, points: ent, color: color.get(name), dashed: true }];
    });
    const span = hist.length > 1 ? hist[hist.length - 1].time_ms - hist[0].time_ms : 0;
    const label = `GPUs held (solid) and entitled (dashed) per tenant over ${dur(span)}. Now: ${
      now.map(t => `${t.name} holds ${plain(t.gpus)} of ${share(t.gpus_entitled)} entitled`).join('; ') || 'no tenants'}.`;

    return h('div', { class: 'stack' },
      cards([
        ['Fairness index', d.fairness === null || d.fairness === undefined ? '—' : d.fairness.toFixed(2), 'Jain’s index over share ÷ entitlement (1 is fair)'],
        ['Tenants', plain(now.length)],
        ['GPUs held', plain(now.reduce((a, t) => a + t.gpus, 0))],
        ['Borrowing', plain(now.filter(t => t.borrowing > 0).length), 'tenants above their entitlement'],
      ]),
      table({
        caption: 'Tenants now',
        rows: now,
        empty: 'Only the default tenant runs jobs.',
        cols: [
          { label: 'Tenant', head: true, cell: t => t.name },
          { label: 'Weight', num: true, cell: t => share(t.weight) },
          { label: 'GPUs held', num: true, cell: t => plain(t.gpus) },
          { label: 'Entitled', num: true, cell: t => share(t.gpus_entitled) },
          { label: 'Quota', num: true, cell: t => (t.quota_gpus === null || t.quota_gpus === undefined ? 'none' : plain(t.quota_gpus)) },
          { label: 'Borrowing', num: true, cell: t => h('span', { class: t.borrowing > 0 ? 'borrowing' : null }, signed(t.borrowing)) },
          { label: 'Queued', num: true, cell: t => `${plain(t.jobs_queued)} (${plural(t.gpus_queued, 'GPU')})` },
          { label: 'Jobs running', num: true, cell: t => plain(t.jobs_running) },
        ],
      }),
      section('GPUs over time',
        h('figure', { class: 'chart-box' },
          lineChart({ title: 'GPUs held and entitled per tenant', label, series, yFormat: share }),
          h('figcaption', {}, legend(names.map(n => ({ text: `${n}: held, entitled`, color: color.get(n), pair: true }))))),
        dataTable('tenants-history', 'GPUs held / entitled per tenant (sampled)', [
          { label: 'Time', head: true, cell: p => clock(p.time_ms) },
          ...names.map(n => ({ label: n, num: true, cell: p => {
            const t = (p.tenants || []).find(x => x.name === n);
            return t ? `${plain(t.gpus)} / ${share(t.gpus_entitled)}` : '—';
          } })),
        ], sample(hist, 30))));
  }

  // ---------------------------------------------------------------- decisions

  function decisionsTable(items, caption) {
    return table({
      caption,
      key: 'decisions',
      rows: items,
      empty: 'No decision matches.',
      rowAttrs: x => ({ 'data-seq': x.seq, 'data-job': x.job === null || x.job === undefined ? '' : x.job }),
      cols: [
        { label: 'Time', cls: 'nowrap', cell: x => h('span', { title: x.wall_ms ? new Date(x.wall_ms).toLocaleString() : null }, clock(x.time_ms)) },
        { label: 'Tick', num: true, cell: x => plain(x.tick) },
        { label: 'Job', cell: x => jobLink(x.job, x.job_name) },
        { label: 'Tenant', cell: x => x.tenant || '—' },
        { label: 'Kind', field: 'kind', cell: x => x.kind },
        { label: 'Detail', cls: 'wrap', cell: x => x.detail || '' },
        { label: 'Policy', field: 'policy', cell: x => x.policy },
        { label: 'Version', cls: 'nowrap', cell: x => [`v${plain(x.version)} `, h('code', {}, sha12(x.sha256))] },
        { label: 'Reason', cls: 'reason', cell: x => x.reason || '' },
        { label: 'Outcome', field: 'outcome', cell: x => badge(x.outcome, OUTCOME_TONE[x.outcome]) },
        { label: 'Why', cls: 'reason', cell: x => x.why || '' },
      ],
    });
  }

  function decisionsControls(route) {
    const go = key => v => setParams({ [key]: v, before: '' });
    const hint = h('span', { id: 'f-job-hint', class: 'hint' });
    const job = h('input', { id: 'f-job', name: 'job', type: 'text', inputmode: 'numeric', autocomplete: 'off', size: 8, 'aria-describedby': 'f-job-hint' });
    let timer = 0;
    const applyJob = () => {
      clearTimeout(timer);
      const v = job.value.trim();
      if (!/^\d*$/.test(v)) { hint.textContent = 'A job id is a number.'; job.setAttribute('aria-invalid', 'true'); return; }
      hint.textContent = '';
      job.removeAttribute('aria-invalid');
      if (v !== (app.route.params.job || '')) go('job')(v);
    };
    job.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(applyJob, 600); });
    const sel = {
      tenant: selectField('f-tenant', 'Tenant', go('tenant')),
      policy: selectField('f-policy', 'Policy', go('policy')),
      kind: selectField('f-kind', 'Kind', go('kind')),
      outcome: selectField('f-outcome', 'Outcome', go('outcome')),
    };
    const sync = (data, r) => {
      if (document.activeElement !== job) job.value = r.params.job || '';
      const seen = data ? (data.items || []).map(x => x.tenant).filter(Boolean) : [];
      const tenants = data && data.tenants ? data.tenants : [...new Set([...(app.local.tenants || []), ...seen])].sort();
      setOptions(sel.tenant.sel, tenants, r.params.tenant, 'All tenants');
      setOptions(sel.policy.sel, data ? data.policies : [], r.params.policy, 'All policies');
      setOptions(sel.kind.sel, data ? data.kinds : [], r.params.kind, 'All kinds');
      setOptions(sel.outcome.sel, data ? data.outcomes : Object.keys(OUTCOME_TONE), r.params.outcome, 'All outcomes');
    };
    sync(null, route);
    const clear = h('button', { type: 'button', class: 'quiet', onclick: () => { job.value = ''; location.hash = '#/decisions'; } }, 'Clear filters');
    const form = h('form', { class: 'filters', 'aria-label': 'Filter the decisions', onsubmit: e => { e.preventDefault(); applyJob(); } },
      h('div', { class: 'field' }, h('label', { for: 'f-job' }, 'Job id'), job, hint),
      sel.tenant.el, sel.policy.el, sel.kind.el, sel.outcome.el, h('div', { class: 'field end' }, clear));
    return { el: form, sync };
  }

  async function loadDecisions(route) {
    const p = route.params;
    return getJSON(`api/decisions${qs({ job: p.job, tenant: p.tenant, policy: p.policy, kind: p.kind, outcome: p.outcome, before: p.before, limit: DECISIONS_LIMIT })}`);
  }

  function renderDecisions(d, route) {
    const items = d.items || [];
    const paged = Boolean(route.params.before);
    return h('div', { class: 'stack' },
      h('p', { class: 'muted' }, `${plain(d.total)} matching of ${plain(d.kept)} kept${paged ? `; showing those before #${route.params.before}` : ''}.`),
      decisionsTable(items, 'Decisions, newest first'),
      h('div', { class: 'pager' },
        h('p', { class: 'muted' }, items.length ? `#${items[0].seq} to #${items[items.length - 1].seq}` : ''),
        h('div', { class: 'buttons' },
          paged ? h('button', { type: 'button', 'data-key': 'newest', onclick: () => setParams({ before: '' }) }, 'Newest') : null,
          h('button', { type: 'button', 'data-key': 'older', disabled: d.next_before === null || d.next_before === undefined,
            onclick: () => setParams({ before: d.next_before }) }, 'Older'))));
  }

  // ---------------------------------------------------------------- one job

  function jobControls() {
    const metric = selectField('f-metric', 'Metric', v => { app.local.metric = Number(v); renderPage(); });
    metric.el.hidden = true;
    const sync = data => {
      const names = data && data.metrics ? data.metrics : [];
      metric.el.hidden = names.length < 2;
      const have = [...metric.sel.options].map(o => o.textContent);
      if (have.join('\u0000') !== names.join('\u0000') && document.activeElement !== metric.sel) {
        metric.sel.replaceChildren(...names.map((n, i) => h('option', { value: i }, n)));
      }
      metric.sel.value = String(app.local.metric || 0);
    };
    return { el: h('form', { class: 'filters', 'aria-label': 'Chart options', onsubmit: e => e.preventDefault() }, metric.el), sync };
  }

  function renderJob(d, route) {
    const j = d.job || {};
    app.h1.textContent = `Job ${j.name || route.id}`;
    document.title = `Job ${j.name || route.id} · wasmsched`;
    const metrics = d.metrics || [];
    const mi = Math.min(app.local.metric || 0, Math.max(0, metrics.length - 1));
    const mname = metrics[mi] || 'value';
    const prog = (d.progress || []).filter(p => Number.isFinite((p.values || [])[mi]));
    const points = prog.map(p => [p.time_ms, p.values[mi]]);
    const last = prog[prog.length - 1];
    const fmtVal = v => (Math.abs(v) >= 100 ? String(Math.round(v)) : String(Number(v.toPrecision(3))));
    const label = prog.length
      ? `${mname} over time: ${fmtVal(prog[0].values[mi])} at ${clock(prog[0].time_ms)}, ${fmtVal(last.values[mi])} at ${clock(last.time_ms)} (epoch ${plain(last.epoch)}), ${prog.length} points.`
      : `No ${mname} reported yet.`;
    const stateTone = { running: 'good', queued: 'warn', ended: 'neutral' }[j.state];
    return h('div', { class: 'stack' },
      section('Facts', facts([
        ['Id', plain(j.id)],
        ['State', badge(j.state || '—', stateTone)],
        ['Model', j.model || '—'],
        ['Tenant', j.tenant || '—'],
        ['Namespace', j.namespace || '—'],
        ['GPUs', plain(j.gpus)],
        ['Batch size', plain(j.batch_size)],
        ['Node', j.node || '—'],
        ['Arrived', clock(j.arrival_ms)],
        ['In this state since', j.since_ms === null || j.since_ms === undefined ? '—' : clock(j.since_ms)],
        ['Has run for', dur(j.run_ms)],
        j.reason ? ['Why it waits', j.reason] : null,
      ], 'facts wide')),
      section('Progress',
        h('figure', { class: 'chart-box' },
          lineChart({ title: `${mname} of ${j.name || `job ${route.id}`}`, label, series: [{ name: mname, points, color: 0 }], yFormat: fmtVal, yMin: Math.min(0, ...points.map(p => p[1])) })),
        dataTable('progress', `${mname} over time (sampled)`, [
          { label: 'Time', head: true, cell: p => clock(p.time_ms) },
          { label: 'Epoch', num: true, cell: p => plain(p.epoch) },
          { label: mname, num: true, cell: p => fmtVal(p.values[mi]) },
        ], sample(prog, 30))),
      decisionsTable(d.decisions || [], 'Decisions about this job, newest first'));
  }

  // ---------------------------------------------------------------- shadows

  function renderShadows(d) {
    const list = d.shadows || [];
    if (!list.length) return h('p', { class: 'notice' }, 'No shadow policy is configured.');
    return h('div', { class: 'stack' },
      h('p', { class: 'muted' }, d.active ? ['Compared against the active policy ', h('strong', {}, d.active), '.'] : 'No active policy serves now.'),
      list.map((sh, i) => {
        const pts = (sh.series || []).filter(p => p.compared > 0).map(p => [p.time_ms, (100 * p.agreed) / p.compared]);
        const label = pts.length
          ? `Agreement rate of ${sh.name} over time, from ${Math.round(pts[0][1])} % to ${Math.round(pts[pts.length - 1][1])} % now.`
          : `No comparisons yet for ${sh.name}.`;
        return h('section', { class: 'panel', 'data-shadow': sh.name, 'aria-label': `Shadow ${sh.name}` },
          h('h2', {}, sh.name, ' ', h('span', { class: 'muted small' }, `v${plain(sh.version)}`)),
          cards([
            ['Agreement', h('span', { 'data-field': 'rate' }, sh.compared ? rate(sh.rate) : '—')],
            ['Agreed', `${plain(sh.agreed)} of ${plain(sh.compared)}`, 'ticks compared'],
          ]),
          h('figure', { class: 'chart-box' },
            lineChart({ title: `Agreement rate of ${sh.name}`, label, series: [{ name: sh.name, points: pts, color: i + 1 }], yMin: 0, yMax: 100, yFormat: v => `${Math.round(v)} %` })),
          table({
            caption: `Latest differences of ${sh.name}`,
            key: `diff:${sh.name}`,
            rows: sh.differences || [],
            empty: 'No differences kept.',
            cols: [
              { label: 'Tick', num: true, cell: x => plain(x.tick) },
              { label: 'Time', cls: 'nowrap', cell: x => clock(x.time_ms) },
              { label: 'Active only', cls: 'reason', cell: x => diffList(x.only_active) },
              { label: 'Shadow only', cls: 'reason', cell: x => diffList(x.only_shadow) },
            ],
          }));
      }));
  }

  function diffList(items) {
    if (!items || !items.length) return h('span', { class: 'muted' }, 'nothing');
    return h('ul', { class: 'diff' }, items.map(t => h('li', {}, t)));
  }

  // ---------------------------------------------------------------- the pages

  Object.assign(PAGES, {
    overview: {
      title: () => 'Overview',
      load: r => getJSON(`api/overview${qs({ offset: r.params.offset || 0, limit: PAGE_SIZE })}`),
      render: renderOverview,
    },
    queue: {
      title: () => 'Queue',
      controls: queueControls,
      load: r => getJSON(`api/queue${qs({ tenant: r.params.tenant, namespace: r.params.namespace, offset: r.params.offset || 0, limit: PAGE_SIZE })}`),
      render: renderQueue,
    },
    tenants: { title: () => 'Tenants', load: () => getJSON('api/tenants'), render: renderTenants },
    decisions: { title: () => 'Decisions', controls: decisionsControls, load: loadDecisions, render: renderDecisions },
    job: { title: r => `Job ${r.id}`, controls: jobControls, load: r => getJSON(`api/jobs/${r.id}`), render: renderJob },
    shadows: { title: () => 'Shadows', load: () => getJSON('api/shadows'), render: renderShadows },
  });

  // ---------------------------------------------------------------- start

  function onHashChange() {
    if (location.hash && !location.hash.startsWith('#/')) return;
    const route = parseHash();
    if (!$('#token-form') && app.route && route.page === app.route.page && route.id === app.route.id) softNavigate(route);
    else navigate(route, { focus: true });
  }

  let resizeTimer = 0;
  function onResize() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (!app.data || !app.content || $('#token-form')) return;
      const w = app.content.clientWidth;
      if (Math.abs(w - app.width) > 8 && app.content.querySelector('svg.chart')) renderPage();
      else markScrollable(app.content);
    }, 150);
  }

  function start() {
    document.body.dataset.updates = '0';
    if (!location.hash.startsWith('#/')) history.replaceState(null, '', `${location.pathname}${location.search}#/overview`);
    $('#sign-out').hidden = !getToken();
    $('#sign-out').addEventListener('click', signOut);
    $('#skip').addEventListener('click', e => {
      e.preventDefault();
      const target = $('#title') || view();
      target.focus();
    });
    window.addEventListener('hashchange', onHashChange);
    window.addEventListener('resize', onResize);
    navigate(parseHash(), { focus: false });
    loadHeader();
    startEvents();
  }

  start();
})();
