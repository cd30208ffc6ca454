// probed status page: plain JavaScript, no dependencies.
//
// State comes from one EventSource on api/events (see ui/sse.go): a
// snapshot, the recent past (the latest events and each target's
// readiness timeline, from the server's retained history), then every
// change in revision order, then "stats" with the live probe figures. The
// browser resumes a dropped stream by itself with Last-Event-ID; when it
// gives up (an HTTP error), connect() starts a new stream with
// ?after=<last id>, so no event is lost either way.
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
  const TICK_MS = 2000;     // timelines slide with time: redraw this often
  const CHANGES_MAX = 200;  // readiness changes a timeline keeps
  const PROBES = ['startup', 'liveness', 'readiness'];
  // Timeline states, as the server numbers them (ui/recent.go).
  const NOT_READY = 0;
  const READY = 1;
  const TERMINATING = 2;
  const STATE_CLASS = ['s0', 's1', 's2'];
  const STATE_NAME = ['not ready', 'ready', 'terminating'];

  const $ = (id) => document.getElementById(id);
  const els = {
    list: $('list'), viewport: $('viewport'), head: $('head'), headWrap: $('head-wrap'), empty: $('empty'),
    feed: $('feed'), foot: $('foot'), filter: $('filter'), conn: $('conn'), feedToggle: $('feed-toggle'),
    detail: $('detail'), dName: $('d-name'), dStatus: $('d-status'), dEvents: $('d-events'),
    dJSON: $('d-json'), dCmd: $('d-cmd'), dTimeline: $('d-timeline'), dWindow: $('d-window'),
    members: $('members'), membersList: $('members-list'), about: $('about'),
  };

  const st = {
    targets: new Map(), // name -> target (view from the server + stats + page fields)
    names: [],          // every name, sorted
    shown: [],          // names passing the filter, sorted
    tokens: [],         // filter tokens, lower case
    state: 'all',       // all | ready | notready | terminating
    probes: [],         // the probe types some target has: the columns shown
    lastId: '',         // last SSE id: the revision the page is consistent at
    revision: 0,
    about: null,        // {version, addr, replica}: the probed serving the page
    loaded: false,
    selected: '',
    feed: [],           // newest first
    detailEvents: null, // the selected target's events, newest first
    es: null,
    retryTimer: 0,
    since: 0,           // when the first snapshot completed
    windowMs: 5 * 60e3, // the timelines' window (the server's --ui-timeline)
    skew: 0,            // browser clock - server clock, ms
    dirty: { shown: true, rows: true, counts: true, feed: true, detail: true },
    frame: 0,
    flashTimer: 0,
    cluster: null,      // cluster mode: the "members" message (live replicas)
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

  // span formats a duration for people: "40s", "3m20s", "2h5m".
  function span(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`;
    if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor(s / 60) % 60 ? `${Math.floor(s / 60) % 60}m` : ''}`;
    return `${Math.floor(s / 86400)}d`;
  }

  const serverNow = () => Date.now() - st.skew;

  function ago(ms) {
    if (!ms) return '';
    const d = serverNow() - ms;
    return d < 1000 ? 'just now' : `${span(d)} ago`;
  }

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function clock(ms) {
    const d = new Date(ms);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  const stateOf = (t) => (t.phase === 'terminating' ? 'terminating' : t.ready ? 'ready' : 'notready');
  const STATE_TEXT = { ready: 'ready', notready: 'not ready', terminating: 'terminating' };
  // timelineState is a target's state as its timeline draws it.
  const timelineState = (t) => (t.phase === 'terminating' ? TERMINATING : t.ready ? READY : NOT_READY);

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

  // periodText is "↻ 100ms": how often the probe runs (the initial
  // period while a fast-until-ready probe has not passed yet).
  function periodText(p) {
    if (!p.initialized && p.initialPeriodMs && p.initialPeriodMs !== p.periodMs) {
      return `<span class="period fast" title="every ${fmtMs(p.initialPeriodMs)} until the probe first passes, then every ${fmtMs(p.periodMs)}">↻\u2009${fmtMs(p.initialPeriodMs)}</span>`;
    }
    return `<span class="period" title="every ${fmtMs(p.periodMs)} (effective period)">↻\u2009${fmtMs(p.periodMs)}</span>`;
  }

  function probeCell(t, type) {
    const p = t.probes && t.probes[type];
    if (!p) return '<span class="none">—</span>';
    const s = t.stats && t.stats[type];
    const lat = s && s.total ? `<span class="lat" title="last run's latency">${fmtUs(s.latencyUs)}</span>` : '';
    return `<div class="two probe"><div class="line"><span class="pill ${p.result}">${p.result}</span>${periodText(p)}</div>` +
      `<div class="line">${sparkline(s, 48, 14)}${lat}</div></div>`;
  }

  // why returns the probe that explains the target's state, with its live
  // figures: the startup probe while it has not started, a failing
  // liveness probe, a readiness probe that does not pass; when all pass,
  // the one that ran last.
  function why(t) {
    const has = (type) => t.probes && t.probes[type];
    const pick = (type) => ({ type, p: t.probes[type], s: (t.stats && t.stats[type]) || null });
    if (has('startup') && !t.started) return pick('startup');
    if (has('liveness') && t.probes.liveness.result === 'failure') return pick('liveness');
    if (has('readiness') && t.probes.readiness.result !== 'success') return pick('readiness');
    let best = null;
    for (const type of PROBES) {
      const s = t.stats && t.stats[type];
      if (has(type) && s && s.last && (!best || s.last > best.s.last)) best = pick(type);
    }
    return best;
  }

  function stateCell(t) {
    const state = stateOf(t);
    const marks = [];
    if (t.phase !== 'terminating') {
      marks.push(t.started ? '<span title="the startup probe passed (or there is none)">started</span>' : '<span class="no" title="the startup probe has not passed">not started</span>');
      marks.push(t.live ? '<span title="the liveness probe does not fail (or there is none)">live</span>' : '<span class="no" title="the liveness probe fails">not live</span>');
    }
    return `<div class="two"><div class="line"><span class="pill ${state}">${STATE_TEXT[state]}</span></div>` +
      `<div class="sub">${marks.join(' · ') || 'preStop running'}</div></div>`;
  }

  function messageCell(t) {
    if (t.phase === 'terminating') {
      return '<div class="two"><div class="msg phase terminating">terminating: probes stopped, preStop running</div>' +
        '<div class="sub">removed when the preStop hook ends</div></div>';
    }
    const w = why(t);
    if (!w) return '<span class="none">—</span>';
    const s = w.s;
    if (!s) { // the live figures come with the next stats message
      return `<div class="two"><div class="msg muted-msg">${w.type} ${w.p.result}</div><div class="sub">${w.type}</div></div>`;
    }
    if (!s.total) {
      return `<div class="two"><div class="msg muted-msg">${w.type} probe has not run yet</div><div class="sub">${w.type} · ${w.p.result}</div></div>`;
    }
    const failed = s.results && s.results[s.results.length - 1] === 'f';
    const runs = `${w.type} · ${fmtUs(s.latencyUs)} · ${s.total} run${s.total === 1 ? '' : 's'}`;
    if (failed || w.p.result !== 'success') {
      // Why it fails comes first: up to two lines of the message, after
      // the probe's name.
      return `<div class="msg failure wrap" title="${esc(`${runs}\n${s.message || ''}`)}"><span class="ptype">${w.type}</span>${esc(s.message || 'failed')}</div>`;
    }
    return `<div class="two"><div class="msg" title="${esc(s.message || '')}">${esc(s.message || 'ok')}</div><div class="sub">${runs}</div></div>`;
  }

  // ---------- timelines ----------

  // segments returns the target's readiness from `from` to `to` (server
  // ms) as [start, end, state] pieces; state is 0, 1, 2, 'u' (unknown) or
  // null (the target did not exist yet).
  function segments(t, from, to) {
    const tl = t.tl || { changes: [] };
    const changes = tl.changes;
    let state;
    if (changes.length === 0) {
      // No change in the window: the present state throughout, since the
      // target was created.
      state = t.created && t.created > from ? null : timelineState(t);
    } else if (tl.start !== undefined) {
      state = tl.start;
    } else if (tl.created || (t.created && t.created > from)) {
      state = null;
    } else {
      state = 'u';
    }
    const out = [];
    let at = from;
    const born = !changes.length && t.created && t.created > from ? t.created : 0;
    if (born) {
      out.push([from, Math.min(born, to), null]);
      at = Math.min(born, to);
      state = timelineState(t);
    }
    for (const [when, s] of changes) {
      if (when > at) {
        out.push([at, Math.min(when, to), state]);
        at = Math.min(when, to);
      }
      state = s;
    }
    if (to > at) out.push([at, to, state]);
    return out;
  }

  // timeline draws segments as an SVG strip of width w (a viewBox: CSS
  // sizes it) and height h; a change narrower than a pixel still shows.
  function timeline(t, from, to, w, h, cls) {
    const scale = w / (to - from);
    let rects = '';
    let flips = 0;
    let prev;
    for (const [a, b, s] of segments(t, from, to)) {
      if (s === null) continue;
      const x = (a - from) * scale;
      const width = Math.max(1, (b - a) * scale);
      const c = s === 'u' ? 'su' : STATE_CLASS[s];
      rects += `<rect class="${c}" x="${x.toFixed(2)}" y="0" width="${width.toFixed(2)}" height="${h}"/>`;
      if (prev !== undefined && prev !== s && s !== 'u' && prev !== 'u') flips++;
      prev = s;
    }
    return { svg: `<svg class="${cls}" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" aria-hidden="true"><rect class="bg" width="${w}" height="${h}"/>${rects}</svg>`, flips };
  }

  // timelineCaption says what the strip shows: how often readiness
  // changed, or how long the target has been in its state.
  function timelineCaption(t, flips, now) {
    if (flips >= 2) return `<span class="flaps">${flips} changes</span> in ${span(st.windowMs)}`;
    const tl = t.tl;
    const since = tl && tl.changes.length ? tl.changes[tl.changes.length - 1][0] : t.created;
    const state = STATE_NAME[timelineState(t)];
    if (!since) return `${state}`;
    if (!tl || !tl.changes.length) {
      return now - since > st.windowMs ? `${state} for ${span(st.windowMs)}+` : `${state} for ${span(now - since)}`;
    }
    return `${state} for ${span(now - since)}`;
  }

  function timelineCell(t) {
    const now = serverNow();
    const { svg, flips } = timeline(t, now - st.windowMs, now, 120, 10, 'tl');
    return `<div class="two" title="readiness, last ${span(st.windowMs)}">${svg}<div class="sub">${timelineCaption(t, flips, now)}</div></div>`;
  }

  // noteState records in the target's timeline its state after an event
  // (time: server ms), when it differs from before (its state before the
  // event; undefined for a new target).
  function noteState(t, time, before) {
    t.tl = t.tl || { changes: [] };
    const s = timelineState(t);
    if (before === s) return;
    const tl = t.tl;
    if (!tl.changes.length && before !== undefined && !tl.created && !(t.created > serverNow() - st.windowMs)) {
      tl.start = before; // held since the window's start
    }
    tl.changes.push([time, s]);
    if (tl.changes.length > CHANGES_MAX) {
      tl.changes.shift();
      tl.start = undefined;
      tl.created = 0;
    }
  }

  // pruneTimelines forgets the changes older than the window, keeping the
  // state they left as the start.
  function pruneTimelines() {
    const from = serverNow() - st.windowMs;
    for (const t of st.targets.values()) {
      const tl = t.tl;
      const c = tl && tl.changes;
      if (!c || !c.length) continue;
      while (c.length > 1 && c[1][0] <= from) {
        tl.start = c.shift()[1];
        tl.created = 0;
      }
      if (c.length === 1 && c[0][0] <= from) {
        // Nothing changed in the window: the present state throughout.
        c.length = 0;
        tl.start = undefined;
        tl.created = 0;
      }
    }
  }

  // ---------- rows ----------

  function columns() {
    return ['stripe', 'target', 'state', 'timeline', ...st.probes, ...(st.cluster ? ['replica'] : []), 'message'];
  }

  const COL_WIDTH = {
    stripe: '4px', target: 'minmax(116px, 1.1fr)', state: '100px', timeline: 'minmax(116px, 150px)',
    startup: 'minmax(116px, 0.8fr)', liveness: 'minmax(116px, 0.8fr)', readiness: 'minmax(116px, 0.8fr)',
    replica: 'minmax(90px, 0.6fr)', message: 'minmax(220px, 2.4fr)',
  };

  function renderHead() {
    const titles = {
      stripe: '', target: 'Target', state: 'State',
      timeline: `<span title="readiness over the last ${span(st.windowMs)}: green ready, red not ready, purple terminating">Readiness, <span class="nocase">${span(st.windowMs)}</span></span>`,
      startup: 'Startup', liveness: 'Liveness', readiness: 'Readiness', message: 'Last message',
      replica: '<span title="the replica that probes the target">Replica</span>',
    };
    const cols = columns();
    document.documentElement.style.setProperty('--cols', cols.map((c) => COL_WIDTH[c]).join(' '));
    els.head.innerHTML = cols.map((c) => `<span>${titles[c]}</span>`).join('');
  }

  function rowHTML(t) {
    let labels = '';
    let all = '';
    if (t.labels) {
      for (const k of Object.keys(t.labels).sort()) {
        const kv = `${k}=${t.labels[k]}`;
        labels += `<span class="label" title="${esc(kv)}">${esc(kv)}</span>`;
        all += `${all ? '\n' : ''}${kv}`;
      }
    }
    // A chip cut by the column shows itself whole in its tooltip; the
    // labels' line lists them all (some may not fit).
    return `<span class="stripe"></span>` +
      `<div class="two"><div class="name" title="${esc(t.name)}">${esc(t.name)}</div><div class="labels" title="${esc(all)}">${labels}</div></div>` +
      stateCell(t) +
      timelineCell(t) +
      st.probes.map((type) => probeCell(t, type)).join('') +
      (st.cluster ? replicaCell(t) : '') +
      `<div class="message">${messageCell(t)}</div>`;
  }

  // replicaCell names the replica that probes t ("—" while its shard
  // changes hands); this replica's own targets are marked.
  function replicaCell(t) {
    if (!t.replica) return '<div class="replica muted" title="no replica probes it right now: its shard is changing hands">—</div>';
    const self = t.replica === st.cluster.self;
    return `<div class="replica mono${self ? ' self' : ''}" title="${self ? 'probed by this replica' : 'probed by another replica: its live figures are there'}">${esc(t.replica)}</div>`;
  }

  // renderMembers lists the live replicas (cluster mode).
  function renderMembers() {
    const c = st.cluster;
    els.members.hidden = !c;
    if (!c) return;
    els.membersList.innerHTML = c.members.map((m) =>
      `<li class="${m.self ? 'self' : ''}"><b class="mono">${esc(m.id)}</b>${m.self ? ' <span class="small-muted">(this one)</span>' : ''}` +
      `<div class="small-muted"><span class="mono">${esc(m.addr)}</span> · ${m.shards} of ${c.shards} shards` +
      `${m.joined ? ` · joined ${ago(m.joined)}` : ''}</div></li>`).join('') || '<li class="muted">no live replica</li>';
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
  // own fields (stats, highlight, timeline).
  function put(view) {
    const old = st.targets.get(view.name);
    const t = view;
    t.key = searchKey(t);
    if (old) {
      t.stats = old.stats;
      if (t.replica === undefined) t.replica = old.replica;
      t.flashUntil = old.flashUntil;
      t.tl = old.tl;
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
    const before = t ? timelineState(t) : undefined;
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
        noteState(t, ev.time, before);
        break;
      case 'deleted':
        remove(ev.name);
        break;
      case 'created':
        if (!ev.target) break;
        remove(ev.name); // a new target by that name: a new timeline
        t = put(ev.target);
        t.tl = { changes: [], created: ev.time };
        noteState(t, ev.time, undefined);
        flash(t);
        break;
      default: // updated, reset, terminating: the whole target
        if (!ev.target) break;
        t = put(ev.target);
        noteState(t, ev.time, before);
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

  // applyRecent takes the recent past a new stream sends after its
  // snapshot: the feed's latest events and the readiness timelines.
  function applyRecent(d) {
    st.skew = Date.now() - d.to;
    st.windowMs = Math.max(1000, d.to - d.from);
    for (const t of st.targets.values()) {
      const tl = d.timelines[t.name];
      t.tl = tl ? { changes: tl.changes, start: tl.start, created: tl.created || 0 } : { changes: [] };
    }
    st.feed = d.events.filter((ev) => ev.kind !== 'initialized').reverse().slice(0, FEED_MAX);
    feedTop = -1; // the feed is drawn anew, without highlights
    st.dirty.feed = true;
    st.dirty.head = true;
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
    on('about', (d) => {
      st.about = d;
      const where = d.replica ? `replica ${d.replica} · ${d.addr}` : d.addr;
      els.about.textContent = `status · ${where}`;
      els.about.title = `probed ${d.version}, API on ${d.addr}${d.replica ? `, replica ${d.replica}` : ''}`;
    });
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
    on('recent', applyRecent);
    on('events', (d) => {
      for (const ev of d.events) applyEvent(ev);
      st.revision = Math.max(st.revision, d.revision);
    });
    on('stats', (d) => {
      for (const s of d.targets) {
        const t = st.targets.get(s.name);
        if (!t) continue;
        t.stats = s.probes;
        if (s.replica !== undefined && s.replica !== t.replica) {
          t.replica = s.replica;
          st.dirty.detail = true;
        }
      }
    });
    on('members', (d) => {
      const first = !st.cluster;
      st.cluster = d;
      if (first) st.dirty.head = true;
      st.dirty.members = true;
    });
    on('progress', (d) => { st.revision = Math.max(st.revision, d.revision); });
  }

  // ---------- rendering ----------

  function schedule() {
    if (!st.frame) st.frame = requestAnimationFrame(render);
  }

  // matches reports whether t passes the text filter.
  function matches(t) {
    for (const tok of st.tokens) if (!t.key.includes(tok)) return false;
    return true;
  }

  function render() {
    st.frame = 0;
    const d = st.dirty;
    if (d.shown) {
      st.shown = (st.state === 'all' && st.tokens.length === 0)
        ? st.names
        : st.names.filter((n) => {
          const t = st.targets.get(n);
          return (st.state === 'all' || stateOf(t) === st.state) && matches(t);
        });
      d.shown = false;
      d.rows = true;
    }
    if (d.counts) { renderCounts(); d.counts = false; }
    if (d.head) { renderHead(); d.head = false; d.rows = true; }
    if (d.rows) { renderRows(); d.rows = false; }
    if (d.feed) { renderFeed(); d.feed = false; }
    if (d.members) { renderMembers(); d.members = false; }
    if (d.detail && st.selected) { renderDetail(); }
    d.detail = false;
  }

  // renderCounts counts the targets that pass the text filter (the chips
  // say how many of those are ready, not ready, terminating) and finds
  // the probe types to show as columns.
  function renderCounts() {
    let all = 0;
    let ready = 0;
    let terminating = 0;
    const has = { startup: false, liveness: false, readiness: false };
    for (const t of st.targets.values()) {
      if (t.probes) for (const type of PROBES) if (t.probes[type]) has[type] = true;
      if (st.tokens.length && !matches(t)) continue;
      all++;
      if (t.phase === 'terminating') terminating++;
      else if (t.ready) ready++;
    }
    const notReady = all - ready - terminating;
    $('n-all').textContent = all;
    $('n-ready').textContent = ready;
    $('n-notready').textContent = notReady;
    $('n-terminating').textContent = terminating;
    const probes = PROBES.filter((type) => has[type]);
    if (probes.join() !== st.probes.join() || !els.head.childElementCount) {
      st.probes = probes;
      st.dirty.head = true;
    }
    let down = 0;
    for (const t of st.targets.values()) if (t.phase !== 'terminating' && !t.ready) down++;
    const who = st.about ? (st.about.replica || st.about.addr) : '';
    document.title = `${down ? `(${down} not ready) ` : ''}probed${who ? ` ${who}` : ''} · status`;
    const filtered = st.tokens.length ? ` (${all} match the filter)` : '';
    const about = st.about ? `<span class="about">probed ${esc(st.about.version)} · API ${esc(st.about.addr)}${st.about.replica ? ` · replica ${esc(st.about.replica)}` : ''}</span>` : '';
    els.foot.innerHTML = `${about}<span title="Every change to a target is an event with a revision that only goes up; the page has every event up to this one. probectl watch --since REV resumes from a revision.">up to date at revision ${st.revision}</span>` +
      `<span>showing ${st.shown.length} of ${st.targets.size}${filtered}</span>` +
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

  // readyBadge is the ready / not ready badge of an event that can change
  // readiness; liveness events and first passes cannot, and wear none.
  function readyBadge(ev) {
    if (ev.kind === 'deleted' || ev.kind === 'initialized' || ev.probe === 'liveness') return '';
    return `<span class="pill ${ev.ready ? 'ready' : 'notready'}">${ev.ready ? 'ready' : 'not ready'}</span>`;
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
    return `<div class="evhead"><span class="when">${clock(ev.time)}</span>${withName ? `<span class="who">${esc(ev.name)}</span>` : `<span class="kind">rev ${ev.rev}</span>`}${readyBadge(ev)}</div>` +
      `<div class="what">${what}</div>` +
      (ev.message ? `<div class="evmsg" title="${esc(ev.message)}">${esc(ev.message)}</div>` : '');
  }

  // renderFeed prepends the events newer than those shown (so the ones
  // shown keep their place and their arrival highlight) and trims the end.
  let feedTop = -1; // revision of the newest event shown; -1: none yet (draw anew)
  function renderFeed() {
    let html = '';
    const fresh = feedTop < 0;
    for (const ev of st.feed) {
      if (ev.rev <= feedTop) break;
      html += `<li class="ev${fresh ? '' : ' new'}" data-name="${esc(ev.name)}">${eventHTML(ev, true)}</li>`;
    }
    if (html) {
      if (fresh) els.feed.textContent = '';
      els.feed.insertAdjacentHTML('afterbegin', html);
      feedTop = st.feed[0].rev;
      while (els.feed.children.length > FEED_MAX) els.feed.lastElementChild.remove();
    } else if (fresh) {
      els.feed.innerHTML = `<li class="muted">${st.loaded ? 'No transitions in the retained history yet.' : 'loading…'}</li>`;
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

  // detailTimeline draws the selected target's readiness over the window
  // with a time axis and lists its changes.
  function detailTimeline(t) {
    const now = serverNow();
    const from = now - st.windowMs;
    const { svg, flips } = timeline(t, from, now, 600, 22, 'tl big');
    const ticks = []; // placed by app.css (.axis span:nth-child)
    const step = st.windowMs / 5;
    for (let i = 0; i <= 5; i++) ticks.push(`<span>${i === 5 ? 'now' : `−${span(st.windowMs - i * step)}`}</span>`);
    const changes = (t.tl ? t.tl.changes : []).filter(([when]) => when >= from).slice(-8).reverse();
    const list = changes.map(([when, s]) => `<li><span class="when">${clock(when)}</span><span class="dot ${STATE_CLASS[s]}"></span>${STATE_NAME[s]}</li>`).join('');
    return `${svg}<div class="axis">${ticks.join('')}</div>` +
      `<div class="tl-caption">${timelineCaption(t, flips, now)}</div>` +
      (list ? `<ol class="changes">${list}</ol>` : '<p class="muted">No change of readiness in this window.</p>');
  }

  function renderDetail() {
    const name = st.selected;
    const t = st.targets.get(name);
    const state = t ? stateOf(t) : '';
    els.dName.innerHTML = `<span>${esc(name)}</span>${t ? `<span class="pill ${state}">${STATE_TEXT[state]}</span>` : '<span class="pill unknown">not found</span>'}`;
    els.dWindow.textContent = `last ${span(st.windowMs)}`;
    if (!t) {
      els.dStatus.innerHTML = '<p class="muted">This target does not exist (any more).</p>';
      els.dTimeline.innerHTML = '';
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
      const yesNo = (v, what) => (v ? `<span class="yes" title="${what}">✓</span>` : `<span class="no" title="not ${what}">✗</span>`);
      els.dStatus.innerHTML = `<div class="kv">` +
        `<div><span class="k">Phase</span><span class="phase ${t.phase}">${t.phase}</span></div>` +
        `<div><span class="k">Started · Live · Ready</span><span>${yesNo(t.started, 'started')} ${yesNo(t.live, 'live')} ${yesNo(t.ready, 'ready')}</span></div>` +
        `<div><span class="k">Revision</span><span class="mono">${t.rev}</span></div>` +
        (st.cluster ? `<div><span class="k">Probed by</span><span>${t.replica ? `<span class="mono">${esc(t.replica)}</span>${t.replica === st.cluster.self ? ' (this replica)' : ' (another replica: live figures and messages are there)'}` : '— (changing hands)'}</span></div>` : '') +
        `<div><span class="k">Created</span><span>${t.created ? `${new Date(t.created).toLocaleString()}` : '—'}</span></div>` +
        `<div><span class="k">Labels</span><span>${labels || '—'}</span></div></div>` +
        (probes ? `<table class="probes"><thead><tr><th>Probe</th><th>Result</th><th>Period</th><th>Thresholds</th><th>Runs</th><th>Recent latency</th></tr></thead><tbody>${probes}</tbody></table>`
          : '<p class="muted">No probes: the target is ready while it is active.</p>');
      els.dTimeline.innerHTML = detailTimeline(t);
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

  // The transitions panel: shown unless the user hid it, or the window is
  // too narrow for it and the table (then it opens over the list).
  const FEED_KEY = 'probed.feed';
  function setFeed(shown, remember) {
    document.body.classList.toggle('feed-hidden', !shown);
    els.feedToggle.setAttribute('aria-pressed', String(shown));
    if (remember) try { localStorage.setItem(FEED_KEY, shown ? 'shown' : 'hidden'); } catch (e) { /* private mode */ }
    st.dirty.rows = true;
    schedule();
  }
  let feedPref = null;
  try { feedPref = localStorage.getItem(FEED_KEY); } catch (e) { /* private mode */ }
  setFeed(feedPref ? feedPref === 'shown' : window.innerWidth >= 1180, false);
  els.feedToggle.addEventListener('click', () => setFeed(document.body.classList.contains('feed-hidden'), true));

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
  // Timelines slide and "ago" texts age: redraw what is on screen.
  setInterval(() => {
    pruneTimelines();
    st.dirty.rows = true;
    st.dirty.detail = Boolean(st.selected);
    schedule();
  }, TICK_MS);

  const q = new URLSearchParams(location.search).get('q');
  if (q) { els.filter.value = q; setFilter(q); }
  if (location.hash.length > 1) select(decodeURIComponent(location.hash.slice(1)));
  connect();
  schedule();
})();
