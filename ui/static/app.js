// probed status page: plain JavaScript, no dependencies.
//
// State comes from one EventSource on api/events (see ui/sse.go): a
// snapshot, then every change in revision order, then "stats" with the
// live probe figures. The browser resumes a dropped stream by itself with
// Last-Event-ID; when it gives up (an HTTP error), connect() starts a new
// stream with ?after=<last id>, so no event is lost either way.
//
// Only the rows in view exist in the DOM (fixed row height), and the page
// renders at most once per animation frame, so thousands of targets and
// bursts of events stay smooth.
'use strict';

(() => {
  const ROW = 48;           // px, = --row in app.css
  const OVERSCAN = 6;       // rows rendered above and below the view
  const FLASH_MS = 1500;    // a flipped target stays highlighted this long
  const FEED_MAX = 150;     // transitions kept in the feed
  const DETAIL_MAX = 100;   // events kept in the detail panel
  const PROBES = ['startup', 'liveness', 'readiness'];

  const $ = (id) => document.getElementById(id);
  const els = {
    list: $('list'), viewport: $('viewport'), headWrap: $('head-wrap'), empty: $('empty'),
    feed: $('feed'), foot: $('foot'), filter: $('filter'), conn: $('conn'),
    detail: $('detail'), dName: $('d-name'), dStatus: $('d-status'), dEvents: $('d-events'),
    dJSON: $('d-json'), dCmd: $('d-cmd'),
  };

  const st = {
    targets: new Map(), // name -> target (view from the server + stats + page fields)
    names: [],          // every name, sorted
    shown: [],          // names passing the filter, sorted
    tokens: [],         // filter tokens, lower case
    state: 'all',       // all | ready | notready | terminating
    lastId: '',         // last SSE id: the revision the page is consistent at
    revision: 0,
    loaded: false,
    selected: '',
    feed: [],           // newest first
    detailEvents: null, // the selected target's events, newest first
    es: null,
    retryTimer: 0,
    since: 0,           // when the first snapshot completed
    dirty: { shown: true, rows: true, counts: true, feed: true, detail: true },
    frame: 0,
    flashTimer: 0,
  };

  // ---------- formatting ----------

  const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);

  function fmtUs(us) {
    if (us < 1000) return `${us}µs`;
    if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 1 : 0)}ms`;
    return `${(us / 1e6).toFixed(us < 1e7 ? 2 : 1)}s`;
  }

  function fmtMs(ms) {
    if (ms < 1000) return `${+ms.toFixed(3)}ms`;
    if (ms < 60000) return `${+(ms / 1000).toFixed(3)}s`;
    return `${+(ms / 60000).toFixed(2)}m`;
  }

  function ago(ms) {
    if (!ms) return '';
    const s = Math.max(0, (Date.now() - ms) / 1000);
    if (s < 1) return 'just now';
    if (s < 60) return `${Math.floor(s)}s ago`;
    if (s < 3600) return `${Math.floor(s / 60)}m ago`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
    return `${Math.floor(s / 86400)}d ago`;
  }

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function clock(ms) {
    const d = new Date(ms);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  const stateOf = (t) => (t.phase === 'terminating' ? 'terminating' : t.ready ? 'ready' : 'notready');
  const STATE_TEXT = { ready: 'ready', notready: 'not ready', terminating: 'terminating' };

  // sparkline draws the recent runs' latencies as bars coloured by result.
  function sparkline(ps, w, h) {
    const lat = ps && ps.latencies;
    if (!lat || lat.length === 0) {
      return `<svg class="spark" width="${w}" height="${h}" aria-hidden="true"><line class="base" x1="0" y1="${h - 0.5}" x2="${w}" y2="${h - 0.5}"/></svg>`;
    }
    const n = 16;
    const bw = w / n;
    let max = 1;
    let min = Infinity;
    for (const v of lat) { max = Math.max(max, v); min = Math.min(min, v); }
    let bars = '';
    for (let i = 0; i < lat.length; i++) {
      const bh = Math.max(2, Math.round((lat[i] / max) * (h - 1)));
      const x = (n - lat.length + i) * bw;
      bars += `<rect class="${ps.results[i] || 'u'}" x="${x.toFixed(1)}" y="${h - bh}" width="${(bw - 1).toFixed(1)}" height="${bh}"/>`;
    }
    const title = `last ${lat.length} runs: ${fmtUs(min)} – ${fmtUs(max)}`;
    return `<svg class="spark" width="${w}" height="${h}" role="img" aria-label="${title}"><title>${title}</title>${bars}</svg>`;
  }

  function periodText(p) {
    if (!p.initialized && p.initialPeriodMs && p.initialPeriodMs !== p.periodMs) {
      return `<span class="period fast" title="initial period, until the probe first passes; then every ${fmtMs(p.periodMs)}">every ${fmtMs(p.initialPeriodMs)}</span>`;
    }
    return `<span class="period" title="effective period">every ${fmtMs(p.periodMs)}</span>`;
  }

  function probeCell(t, type) {
    const p = t.probes && t.probes[type];
    if (!p) return '<span class="none">—</span>';
    const s = t.stats && t.stats[type];
    const lat = s && s.total ? `<span class="lat" title="last run's latency">${fmtUs(s.latencyUs)}</span>` : '';
    return `<div class="two"><div class="line"><span class="pill ${p.result}">${p.result}</span>${periodText(p)}</div>` +
      `<div class="line">${sparkline(s, 64, 16)}${lat}</div></div>`;
  }

  // lastRun returns the probe that ran last (with a message if any).
  function lastRun(t) {
    let best = null;
    if (!t.stats) return best;
    for (const type of PROBES) {
      const s = t.stats[type];
      if (s && s.last && (!best || s.last > best.s.last)) best = { type, s };
    }
    return best;
  }

  const yesNo = (v, what) => (v ? `<span class="yes" title="${what}">✓</span>` : `<span class="no" title="not ${what}">✗</span>`);

  function rowHTML(t) {
    let labels = '';
    if (t.labels) {
      for (const k of Object.keys(t.labels).sort()) labels += `<span class="label">${esc(k)}=${esc(t.labels[k])}</span>`;
    }
    const lr = lastRun(t);
    let msg = '<span class="none">—</span>';
    if (t.phase === 'terminating') {
      msg = '<div class="two"><div class="msg phase terminating">terminating: probes stopped, preStop running</div>' +
        `<div class="sub">removed when the preStop hook ends</div></div>`;
    } else if (lr) {
      const failed = lr.s.results && lr.s.results[lr.s.results.length - 1] === 'f';
      const text = lr.s.message || (failed ? 'failed' : 'ok');
      msg = `<div class="two"><div class="msg${failed ? ' failure' : ''}" title="${esc(lr.s.message || '')}">${esc(text)}</div>` +
        `<div class="sub">${lr.type} · ${fmtUs(lr.s.latencyUs)} · ${lr.s.total} run${lr.s.total === 1 ? '' : 's'}</div></div>`;
    }
    return `<span class="stripe"></span>` +
      `<div class="two"><div class="name" title="${esc(t.name)}">${esc(t.name)}</div><div class="labels">${labels}</div></div>` +
      `<span class="phase ${t.phase}">${t.phase}</span>` +
      `<span class="c">${yesNo(t.started, 'started')}</span>` +
      `<span class="c">${yesNo(t.live, 'live')}</span>` +
      `<span class="c">${yesNo(t.ready, 'ready')}</span>` +
      PROBES.map((type) => probeCell(t, type)).join('') +
      msg;
  }

  // ---------- state ----------

  function searchKey(t) {
    let s = t.name;
    if (t.labels) for (const k of Object.keys(t.labels)) s += `\u0000${k}=${t.labels[k]}`;
    return s.toLowerCase();
  }

  function indexOfName(name) {
    let lo = 0;
    let hi = st.names.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (st.names[mid] < name) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // put adds or replaces a target from a server view, keeping the page's
  // own fields (stats, highlight).
  function put(view) {
    const old = st.targets.get(view.name);
    const t = view;
    t.key = searchKey(t);
    if (old) {
      t.stats = old.stats;
      t.flashUntil = old.flashUntil;
    } else {
      const i = indexOfName(t.name);
      st.names.splice(i, 0, t.name);
    }
    st.targets.set(t.name, t);
    return t;
  }

  function remove(name) {
    if (!st.targets.delete(name)) return;
    const i = indexOfName(name);
    if (st.names[i] === name) st.names.splice(i, 1);
  }

  function flash(t) {
    t.flashUntil = performance.now() + FLASH_MS;
    clearTimeout(st.flashTimer);
    st.flashTimer = setTimeout(() => { st.dirty.rows = true; schedule(); }, FLASH_MS + 50);
  }

  function applyEvent(ev) {
    let t = st.targets.get(ev.name);
    switch (ev.kind) {
      case 'transition':
      case 'initialized':
        if (!t) break;
        if (t.probes && t.probes[ev.probe]) {
          const p = t.probes[ev.probe];
          p.result = ev.to;
          p.transition = ev.time;
          if (ev.kind === 'initialized' || ev.to === 'success') p.initialized = true;
        }
        if ((!ev.reason || ev.reason === 'Probe') && (ev.latencyUs || ev.message)) addRun(t, ev); // a run, not a terminating/reset
        if (t.ready !== ev.ready || ev.kind === 'transition') flash(t);
        t.started = ev.started;
        t.live = ev.live;
        t.ready = ev.ready;
        t.rev = ev.rev;
        break;
      case 'deleted':
        remove(ev.name);
        break;
      default: // created, updated, reset, terminating: the whole target
        if (!ev.target) break;
        t = put(ev.target);
        if (ev.kind !== 'updated') flash(t);
    }
    if (ev.kind !== 'initialized') {
      st.feed.unshift(ev);
      if (st.feed.length > FEED_MAX) st.feed.length = FEED_MAX;
      st.dirty.feed = true;
    }
    if (ev.name === st.selected && st.detailEvents) {
      if (!st.detailEvents.length || st.detailEvents[0].rev < ev.rev) st.detailEvents.unshift(ev);
      if (st.detailEvents.length > DETAIL_MAX) st.detailEvents.length = DETAIL_MAX;
    }
    st.revision = Math.max(st.revision, ev.rev);
  }

  // addRun records the probe run that caused ev in the target's live
  // figures until the next stats message (which replaces them) arrives, so
  // the row never shows a result with the message of the run before it.
  function addRun(t, ev) {
    t.stats = t.stats || {};
    const s = t.stats[ev.probe] = Object.assign({ total: 0, results: '', latencies: [] }, t.stats[ev.probe]);
    s.total++;
    s.message = ev.message;
    s.latencyUs = ev.latencyUs;
    s.last = ev.time;
    s.results = (s.results + ev.to[0]).slice(-16);
    s.latencies = s.latencies.concat(ev.latencyUs).slice(-16);
  }

  function invalidate() {
    st.dirty.shown = st.dirty.rows = st.dirty.counts = st.dirty.detail = true;
    schedule();
  }

  // ---------- stream ----------

  function setConn(kind, text) {
    els.conn.className = `conn ${kind}`;
    els.conn.lastElementChild.textContent = text;
  }

  function connect() {
    clearTimeout(st.retryTimer);
    if (st.es) st.es.close();
    const url = st.lastId ? `api/events?after=${encodeURIComponent(st.lastId)}` : 'api/events';
    const es = new EventSource(url);
    st.es = es;
    const on = (name, fn) => es.addEventListener(name, (e) => {
      fn(JSON.parse(e.data));
      if (e.lastEventId) st.lastId = e.lastEventId;
      invalidate();
    });
    es.onopen = () => setConn('live', 'live');
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) {
        setConn('wait', 'reconnecting…');
        return;
      }
      // The browser gave up (an HTTP error): find out why, then retry.
      setConn('down', 'disconnected');
      fetch(url, { method: 'HEAD', cache: 'no-store' }).then((r) => {
        if (r.status === 401 || r.status === 403) setConn('down', `not authorised (${r.status})`);
        else if (r.status === 429) setConn('down', 'too many open pages (429)');
        else if (!r.ok) setConn('down', `unavailable (${r.status})`);
      }).catch(() => {});
      st.retryTimer = setTimeout(connect, 3000);
    };
    on('reset', () => {
      st.targets.clear();
      st.names = [];
      st.loaded = false;
    });
    on('snapshot', (d) => {
      for (const t of d.targets) put(t);
      st.revision = Math.max(st.revision, d.revision);
      if (d.complete && !st.loaded) {
        st.loaded = true;
        st.since = st.since || Date.now();
        st.dirty.feed = true;
      }
    });
    on('events', (d) => {
      for (const ev of d.events) applyEvent(ev);
      st.revision = Math.max(st.revision, d.revision);
    });
    on('stats', (d) => {
      for (const s of d.targets) {
        const t = st.targets.get(s.name);
        if (t) t.stats = s.probes;
      }
    });
    on('progress', (d) => { st.revision = Math.max(st.revision, d.revision); });
  }

  // ---------- rendering ----------

  function schedule() {
    if (!st.frame) st.frame = requestAnimationFrame(render);
  }

  function passes(t) {
    if (st.state !== 'all' && stateOf(t) !== st.state) return false;
    for (const tok of st.tokens) if (!t.key.includes(tok)) return false;
    return true;
  }

  function render() {
    st.frame = 0;
    const d = st.dirty;
    if (d.shown) {
      st.shown = (st.state === 'all' && st.tokens.length === 0)
        ? st.names
        : st.names.filter((n) => passes(st.targets.get(n)));
      d.shown = false;
      d.rows = true;
    }
    if (d.counts) { renderCounts(); d.counts = false; }
    if (d.rows) { renderRows(); d.rows = false; }
    if (d.feed) { renderFeed(); d.feed = false; }
    if (d.detail && st.selected) { renderDetail(); }
    d.detail = false;
  }

  function renderCounts() {
    let ready = 0;
    let terminating = 0;
    for (const t of st.targets.values()) {
      if (t.phase === 'terminating') terminating++;
      else if (t.ready) ready++;
    }
    const all = st.targets.size;
    $('n-all').textContent = all;
    $('n-ready').textContent = ready;
    $('n-notready').textContent = all - ready - terminating;
    $('n-terminating').textContent = terminating;
    document.title = `${all - ready - terminating ? `(${all - ready - terminating} not ready) ` : ''}probed · status`;
    els.foot.innerHTML = `<span>revision ${st.revision}</span><span>showing ${st.shown.length} of ${all}</span>` +
      `<span>${st.loaded ? `watching since ${clock(st.since)}` : 'loading…'}</span>`;
  }

  const pool = []; // row elements, reused: only the visible rows exist

  function renderRows() {
    const n = st.shown.length;
    els.viewport.style.height = `${n * ROW}px`;
    els.empty.hidden = n > 0 || !st.loaded;
    if (n === 0 && st.loaded) {
      els.empty.textContent = st.targets.size ? 'No target matches the filter.' : 'No targets yet. Create one with probectl apply -f target.yaml.';
    }
    const top = els.list.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(n, Math.ceil((top + els.list.clientHeight) / ROW) + OVERSCAN);
    const now = performance.now();
    while (pool.length < last - first) {
      const el = document.createElement('div');
      el.setAttribute('role', 'row');
      els.viewport.appendChild(el);
      pool.push({ el, html: '', cls: '', idx: -1 });
    }
    for (let i = 0; i < pool.length; i++) {
      const slot = pool[i];
      const idx = first + i;
      if (idx >= last) {
        if (!slot.el.hidden) slot.el.hidden = true;
        continue;
      }
      const t = st.targets.get(st.shown[idx]);
      const html = rowHTML(t);
      const cls = `row ${stateOf(t)}${t.flashUntil > now ? ' flash' : ''}${t.name === st.selected ? ' sel' : ''}`;
      if (slot.html !== html) { slot.el.innerHTML = html; slot.html = html; }
      if (slot.cls !== cls) { slot.el.className = cls; slot.cls = cls; }
      if (slot.idx !== idx) { slot.el.style.transform = `translateY(${idx * ROW}px)`; slot.idx = idx; }
      slot.el.dataset.name = t.name;
      slot.el.hidden = false;
    }
  }

  function eventHTML(ev, withName) {
    let what;
    if (ev.kind === 'transition') {
      what = `<span class="kind">${ev.probe}</span><span class="pill ${ev.from}">${ev.from}</span><span class="arrow">→</span><span class="pill ${ev.to}">${ev.to}</span>`;
    } else if (ev.kind === 'initialized') {
      what = `<span class="kind">${ev.probe} passed for the first time</span>`;
    } else {
      const reason = ev.reason && ev.reason !== 'Probe' && ev.reason.toLowerCase() !== ev.kind ? ` (${esc(ev.reason)})` : '';
      what = `<span class="kind">${ev.kind}${reason}</span>`;
    }
    const state = ev.kind === 'deleted' ? '' : `<span class="pill ${ev.ready ? 'ready' : 'notready'}">${ev.ready ? 'ready' : 'not ready'}</span>`;
    return `<div><span class="when">${clock(ev.time)}</span>${withName ? `<span class="who">${esc(ev.name)}</span>` : `<span class="kind">rev ${ev.rev}</span>`}</div>` +
      `<div class="what">${what}${state}</div>` +
      (ev.message ? `<div class="evmsg" title="${esc(ev.message)}">${esc(ev.message)}</div>` : '');
  }

  // renderFeed prepends the events newer than those shown (so the ones
  // shown keep their place and their arrival highlight) and trims the end.
  let feedTop = -1; // revision of the newest event shown; -1: none yet
  function renderFeed() {
    let html = '';
    for (const ev of st.feed) {
      if (ev.rev <= feedTop) break;
      html += `<li class="ev${feedTop >= 0 ? ' new' : ''}" data-name="${esc(ev.name)}">${eventHTML(ev, true)}</li>`;
    }
    if (html) {
      if (feedTop < 0) els.feed.textContent = '';
      els.feed.insertAdjacentHTML('afterbegin', html);
      feedTop = st.feed[0].rev;
      while (els.feed.children.length > 100) els.feed.lastElementChild.remove();
    } else if (feedTop < 0) {
      els.feed.innerHTML = `<li class="muted">${st.loaded ? 'No transitions since the page was opened.' : 'loading…'}</li>`;
    }
  }

  // ---------- detail ----------

  function select(name) {
    st.selected = name;
    history.replaceState(null, '', `${location.pathname}${location.search}#${encodeURIComponent(name)}`);
    els.detail.hidden = false;
    st.detailEvents = null;
    els.dEvents.innerHTML = '<li class="muted">loading…</li>';
    els.dCmd.textContent = name;
    loadSpec(name);
    fetch(`api/targets/${encodeURIComponent(name)}/events`, { cache: 'no-store' })
      .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
      .then((d) => {
        if (st.selected !== name) return;
        const live = st.detailEvents || [];
        const events = d.events.reverse();
        const newest = events.length ? events[0].rev : 0;
        st.detailEvents = live.filter((ev) => ev.rev > newest).concat(events);
        invalidate();
      })
      .catch((e) => { if (st.selected === name) els.dEvents.innerHTML = `<li class="muted">${esc(e.message)}</li>`; });
    invalidate();
  }

  function loadSpec(name) {
    els.dJSON.textContent = 'loading…';
    fetch(`api/targets/${encodeURIComponent(name)}`, { cache: 'no-store' })
      .then((r) => r.text().then((body) => {
        if (st.selected !== name) return;
        els.dJSON.textContent = r.ok ? body : `HTTP ${r.status}: ${body}`;
      }))
      .catch((e) => { if (st.selected === name) els.dJSON.textContent = e.message; });
  }

  function closeDetail() {
    st.selected = '';
    st.detailEvents = null;
    els.detail.hidden = true;
    history.replaceState(null, '', `${location.pathname}${location.search}`);
    invalidate();
  }

  function renderDetail() {
    const name = st.selected;
    const t = st.targets.get(name);
    const state = t ? stateOf(t) : '';
    els.dName.innerHTML = `<span>${esc(name)}</span>${t ? `<span class="pill ${state}">${STATE_TEXT[state]}</span>` : '<span class="pill unknown">not found</span>'}`;
    if (!t) {
      els.dStatus.innerHTML = '<p class="muted">This target does not exist (any more).</p>';
    } else {
      let labels = '';
      if (t.labels) for (const k of Object.keys(t.labels).sort()) labels += `<span class="label">${esc(k)}=${esc(t.labels[k])}</span>`;
      let probes = '';
      for (const type of PROBES) {
        const p = t.probes && t.probes[type];
        if (!p) continue;
        const s = (t.stats && t.stats[type]) || {};
        const period = p.initialPeriodMs !== p.periodMs
          ? `${fmtMs(p.periodMs)} <span class="small-muted">(${fmtMs(p.initialPeriodMs)} until it passes)</span>` : fmtMs(p.periodMs);
        probes += `<tr><td><b>${type}</b></td><td><span class="pill ${p.result}">${p.result}</span><div class="small-muted">${p.transition ? `since ${ago(p.transition)}` : ''}</div></td>` +
          `<td>${period}<div class="small-muted">timeout ${fmtMs(p.timeoutMs)}</div></td>` +
          `<td>${p.successThreshold}/${p.failureThreshold}<div class="small-muted">${s.successes || 0}✓ ${s.failures || 0}✗ in a row</div></td>` +
          `<td>${s.total || 0}<div class="small-muted">${s.last ? ago(s.last) : 'not run yet'}</div></td>` +
          `<td>${sparkline(s, 128, 26)}<div class="small-muted">${s.total ? `last ${fmtUs(s.latencyUs)}` : ''}</div></td></tr>`;
        if (s.message) probes += `<tr><td></td><td colspan="5" class="pmsg">${esc(s.message)}</td></tr>`;
      }
      els.dStatus.innerHTML = `<div class="kv">` +
        `<div><span class="k">Phase</span><span class="phase ${t.phase}">${t.phase}</span></div>` +
        `<div><span class="k">Started · Live · Ready</span><span>${yesNo(t.started, 'started')} ${yesNo(t.live, 'live')} ${yesNo(t.ready, 'ready')}</span></div>` +
        `<div><span class="k">Revision</span><span class="mono">${t.rev}</span></div>` +
        `<div><span class="k">Created</span><span>${t.created ? `${new Date(t.created).toLocaleString()}` : '—'}</span></div>` +
        `<div><span class="k">Labels</span><span>${labels || '—'}</span></div></div>` +
        (probes ? `<table class="probes"><thead><tr><th>Probe</th><th>Result</th><th>Period</th><th>Thresholds</th><th>Runs</th><th>Recent latency</th></tr></thead><tbody>${probes}</tbody></table>`
          : '<p class="muted">No probes: the target is ready while it is active.</p>');
    }
    if (st.detailEvents) {
      els.dEvents.innerHTML = st.detailEvents.length
        ? st.detailEvents.map((ev) => `<li class="ev">${eventHTML(ev, false)}</li>`).join('')
        : '<li class="muted">No retained events.</li>';
    }
  }

  // ---------- input ----------

  function setFilter(text) {
    st.tokens = text.toLowerCase().split(/\s+/).filter(Boolean);
    const q = new URLSearchParams(location.search);
    if (text) q.set('q', text); else q.delete('q');
    const qs = q.toString();
    history.replaceState(null, '', `${location.pathname}${qs ? `?${qs}` : ''}${location.hash}`);
    els.list.scrollTop = 0;
    invalidate();
  }

  function setState(state) {
    st.state = st.state === state ? 'all' : state;
    for (const b of document.querySelectorAll('.count')) b.setAttribute('aria-pressed', String(b.dataset.state === st.state));
    els.list.scrollTop = 0;
    invalidate();
  }

  els.filter.addEventListener('input', () => setFilter(els.filter.value.trim()));
  for (const b of document.querySelectorAll('.count')) b.addEventListener('click', () => setState(b.dataset.state));
  els.list.addEventListener('scroll', () => {
    els.headWrap.scrollLeft = els.list.scrollLeft;
    st.dirty.rows = true;
    schedule();
  }, { passive: true });
  window.addEventListener('resize', () => { st.dirty.rows = true; schedule(); });
  els.viewport.addEventListener('click', (e) => {
    const row = e.target.closest('.row');
    if (row) select(row.dataset.name);
  });
  els.feed.addEventListener('click', (e) => {
    const li = e.target.closest('li[data-name]');
    if (li) select(li.dataset.name);
  });
  $('d-close').addEventListener('click', closeDetail);
  $('d-refresh').addEventListener('click', () => loadSpec(st.selected));
  document.addEventListener('keydown', (e) => {
    if (e.key === '/' && document.activeElement !== els.filter) {
      e.preventDefault();
      els.filter.focus();
    } else if (e.key === 'Escape') {
      if (st.selected) closeDetail();
      else if (document.activeElement === els.filter) { els.filter.value = ''; setFilter(''); }
    }
  });
  // "ago" texts in the detail panel.
  setInterval(() => { if (st.selected) { st.dirty.detail = true; schedule(); } }, 1000);

  const q = new URLSearchParams(location.search).get('q');
  if (q) { els.filter.value = q; setFilter(q); }
  if (location.hash.length > 1) select(decodeURIComponent(location.hash.slice(1)));
  connect();
  schedule();
})();
