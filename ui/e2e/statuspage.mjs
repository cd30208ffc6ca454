// End-to-end test of probed's status page in headless Chromium, driven by
// ui/e2e_test.go (which builds and runs probed, creates the targets and
// restarts probed when asked). Run it through `go test ./ui -run Chromium`.
//
// Environment: PROBED_UI_URL (the page), TARGET_PORT (where the
// "checkout" target's server comes up, started here after a delay),
// EXPECT_TARGETS (how many targets the page must list), CHROMIUM (the
// browser), SCREENSHOTS (comma-separated PNG paths for the page at 1,400
// px), NARROW_SCREENSHOT (PNG path for the page at 1,280 px),
// DETAIL_SCREENSHOT (PNG path for the detail panel).
//
// Protocol with the Go test: a line "@@ restart" on stdout asks it to
// restart probed and then delete the target "legacy"; it answers "ok" on
// stdin. Any other line is a log line.

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { chromium } from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const URL_ = env('PROBED_UI_URL');
const TARGET_PORT = Number(env('TARGET_PORT'));
const EXPECT_TARGETS = Number(env('EXPECT_TARGETS'));
const SCREENSHOTS = env('SCREENSHOTS').split(',').filter(Boolean);
const DETAIL_SCREENSHOT = process.env.DETAIL_SCREENSHOT || '';
const NARROW_SCREENSHOT = process.env.NARROW_SCREENSHOT || '';

const log = (...a) => console.log(...a);
function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

const stdin = readline.createInterface({ input: process.stdin });
const answers = [];
let waiting = null;
stdin.on('line', (l) => { if (waiting) { const w = waiting; waiting = null; w(l); } else answers.push(l); });
const ask = (what) => {
  console.log(`@@ ${what}`);
  return new Promise((resolve) => { if (answers.length) resolve(answers.shift()); else waiting = resolve; });
};

// rowInfo returns the names and classes of the rows in the DOM.
const rows = (page) => page.$$eval('#viewport .row:not([hidden])', (els) => els.map((e) => ({ name: e.dataset.name, cls: e.className })));
const count = (page, id) => page.$eval(`#${id}`, (e) => Number(e.textContent));

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'probed-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1400, height: 900 }, // a common laptop width
});
let server;
try {
  const page = context.pages()[0] || await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  // Any error in the console (a script error, a Content-Security-Policy
  // violation) fails the test, except requests failing while probed
  // restarts.
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (/net::ERR_|Failed to load resource/.test(m.text())) log(`browser console: ${m.text()}`);
    else errors.push(`console: ${m.text()}`);
  });
  // The api/events streams probed answered: how the page (re)connected.
  // (Attempts refused while probed restarts get no response.) allHeaders
  // has the headers the browser's network stack adds, Last-Event-ID too.
  const streams = [];
  page.on('response', (r) => {
    const req = r.request();
    if (req.url().includes('/api/events') && req.method() === 'GET') {
      streams.push(req.allHeaders().then((h) => ({ url: req.url(), status: r.status(), lastEventId: h['last-event-id'] || '' })));
    }
  });

  // 1. The page loads every target from the snapshot.
  await page.goto(URL_);
  await page.waitForFunction((n) => document.querySelector('#conn.live') && document.querySelector('#n-all').textContent === String(n),
    EXPECT_TARGETS, { timeout: 30000 });
  log(`page lists ${EXPECT_TARGETS} targets`);

  // 1b. The transitions panel starts with the recent past, from the
  // server's history (checkout's creation happened before the page
  // opened), not empty; those entries are not highlighted as new.
  await page.waitForSelector('#feed li.ev[data-name="checkout"]', { timeout: 5000 });
  const seeded = await page.$$eval('#feed li', (lis) => lis.map((li) => ({ cls: li.className, text: li.textContent })));
  // (Events that arrived since are highlighted: "ev new".)
  const old = seeded.filter((li) => li.cls === 'ev');
  check(old.length >= 10, `the feed is seeded from history, without highlights: ${JSON.stringify(seeded.slice(0, 3))}`);
  check(old.some((li) => li.text.includes('checkout') && li.text.includes('created')), 'the seeded feed has checkout\'s creation');
  log(`the transitions panel opened with ${old.length} events from before the page`);

  // 1c. At common laptop widths the reason a target fails is visible
  // without scrolling: the message column is inside the list, which does
  // not scroll sideways, and the transitions panel is there too.
  const layout = (width) => page.evaluate((w) => {
    const list = document.querySelector('#list').getBoundingClientRect();
    const row = document.querySelector('#viewport .row[data-name="db-replica"]');
    const msg = row && row.querySelector('.message .msg');
    const feed = document.querySelector('#feed-panel').getBoundingClientRect();
    return {
      width: w,
      scrolls: document.querySelector('#list').scrollWidth > document.querySelector('#list').clientWidth,
      msgLeft: msg ? msg.getBoundingClientRect().left : -1,
      msgRight: msg ? msg.getBoundingClientRect().right : -1,
      msgWidth: msg ? msg.getBoundingClientRect().width : 0,
      msgText: msg ? msg.textContent : '',
      listRight: list.right,
      feedWidth: feed.width,
    };
  }, width);
  for (const width of [1280, 1440, 1400]) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForFunction(() => {
      const m = document.querySelector('#viewport .row[data-name="db-replica"] .message .msg');
      return m && m.textContent.includes('connection refused');
    }, null, { timeout: 10000 });
    const l = await layout(width);
    check(!l.scrolls, `at ${width}px the list does not scroll sideways: ${JSON.stringify(l)}`);
    check(l.msgRight <= l.listRight && l.msgWidth >= 180, `at ${width}px the message column is on screen and wide: ${JSON.stringify(l)}`);
    check(l.feedWidth > 200 && l.feedWidth <= width / 4.5, `at ${width}px the transitions panel is shown and narrow: ${JSON.stringify(l)}`);
    log(`at ${width}px: message column ${Math.round(l.msgWidth)}px wide ("${l.msgText.slice(0, 40)}…"), no sideways scroll, transitions panel ${Math.round(l.feedWidth)}px`);
  }

  // 2. Only the visible rows exist; scrolling to the end shows the last one.
  const shown = await rows(page);
  check(shown.length > 5 && shown.length < 100, `the list is virtualised (${shown.length} rows in the DOM for ${EXPECT_TARGETS} targets)`);
  const t0 = Date.now();
  await page.$eval('#list', (e) => { e.scrollTop = e.scrollHeight; });
  await page.waitForSelector('#viewport .row[data-name="node-0999"]:not([hidden])', { timeout: 5000 });
  log(`scrolled to the last of ${EXPECT_TARGETS} targets in ${Date.now() - t0}ms with ${(await rows(page)).length} rows in the DOM`);
  await page.$eval('#list', (e) => { e.scrollTop = 0; });

  // 3. checkout is not ready: its server is not up yet.
  await page.waitForSelector('#viewport .row.notready[data-name="checkout"]', { timeout: 10000 });
  check(await count(page, 'n-notready') >= 2, 'checkout and db-replica are counted as not ready');
  await page.waitForTimeout(1000);

  // 4. Its server comes up; the page shows it ready (and highlighted) at once.
  server = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('ok\n'); });
  await new Promise((resolve) => server.listen(TARGET_PORT, '127.0.0.1', resolve));
  const up = Date.now();
  const flip = await page.waitForFunction(() => {
    const row = document.querySelector('#viewport .row[data-name="checkout"]');
    return row && row.classList.contains('ready') && { flash: row.classList.contains('flash') };
  }, null, { polling: 10, timeout: 20000 });
  const took = Date.now() - up;
  const flashed = (await flip.jsonValue()).flash;
  log(`checkout turned ready ${took}ms after its server came up (probe period 100ms)${took > 1000 ? ' — slower than 1s, a loaded machine?' : ''}`);
  check(flashed, 'a target that flips is highlighted');
  await page.waitForSelector('#feed li[data-name="checkout"] .pill.success', { timeout: 5000 });
  // Its timeline shows not ready, then ready.
  await page.waitForSelector('#viewport .row[data-name="checkout"] svg.tl rect.s0', { timeout: 5000 });
  await page.waitForSelector('#viewport .row[data-name="checkout"] svg.tl rect.s1', { timeout: 5000 });

  // 5. Filters: by label, by name, and by state.
  await page.fill('#filter', 'tier=frontend');
  await page.waitForFunction(() => document.querySelectorAll('#viewport .row:not([hidden])').length === 2);
  const frontend = (await rows(page)).map((r) => r.name).sort().join(',');
  check(frontend === 'checkout,frontend', `filter tier=frontend shows checkout and frontend, not ${frontend}`);
  // The count chips count what the filter shows.
  await page.fill('#filter', 'tier=backend');
  await page.waitForFunction(() => document.querySelector('#n-all').textContent === '3');
  const chips = await page.$$eval('.counts b', (bs) => bs.map((b) => Number(b.textContent)));
  check(chips[0] === 3 && chips[1] + chips[2] + chips[3] === 3, `the chips count the 3 backend targets: ${chips}`);
  await page.fill('#filter', 'node-099');
  await page.waitForFunction(() => document.querySelectorAll('#viewport .row:not([hidden])').length === 10);
  await page.fill('#filter', '');
  await page.click('button.count.notready');
  await page.waitForFunction(() => [...document.querySelectorAll('#viewport .row:not([hidden])')].every((r) => r.classList.contains('notready')));
  const notReady = (await rows(page)).map((r) => r.name);
  check(notReady.includes('db-replica') && !notReady.includes('checkout'), `the not-ready filter shows db-replica and not checkout: ${notReady}`);
  await page.click('button.count.notready');
  await page.waitForFunction((n) => document.querySelector('#foot').textContent.includes(`showing ${n} of ${n}`), EXPECT_TARGETS);
  log('filters work');

  // The page says which probed serves it; a label chip shows itself whole
  // in its tooltip.
  const about = await page.$eval('#about', (e) => e.textContent);
  check(/127\.0\.0\.1:\d+/.test(about), `the header names the probed's API address: ${about}`);
  const foot = await page.$eval('#foot', (e) => e.textContent);
  check(/probed \S+ · API 127\.0\.0\.1:\d+/.test(foot) && foot.includes('up to date at revision'), `the footer says which probed and which revision: ${foot}`);
  await page.fill('#filter', 'db-replica');
  await page.waitForSelector('#viewport .row[data-name="db-replica"] .labels .label');
  const chip = await page.$eval('#viewport .row[data-name="db-replica"] .labels .label', (e) => e.title);
  check(chip === 'app=db', `a label chip has its text as tooltip: ${chip}`);
  await page.fill('#filter', '');
  await page.waitForFunction((n) => document.querySelector('#foot').textContent.includes(`showing ${n} of ${n}`), EXPECT_TARGETS);
  log('the page says which probed it is; label chips have tooltips');

  // 6. Clicking a target shows its spec as probectl prints it, and its events.
  await page.click('#viewport .row[data-name="checkout"]');
  await page.waitForFunction(() => {
    try { return JSON.parse(document.querySelector('#d-json').textContent).name === 'checkout'; } catch { return false; }
  }, null, { timeout: 10000 });
  const spec = JSON.parse(await page.$eval('#d-json', (e) => e.textContent));
  check(spec.readinessProbe.httpGet.port === TARGET_PORT, 'the spec is the target\'s');
  check(spec.status && spec.status.phase === 'PHASE_ACTIVE', 'the spec has its status, as probectl get -o json prints it');
  await page.waitForFunction(() => [...document.querySelectorAll('#d-events .ev')].some((e) => e.textContent.includes('created')), null, { timeout: 10000 });
  await page.waitForFunction(() => [...document.querySelectorAll('#d-events .ev')].some((e) => e.textContent.includes('failure→success')), null, { timeout: 10000 });
  // Its readiness timeline, with a time axis and the changes listed.
  await page.waitForSelector('#d-timeline svg.tl.big rect.s1', { timeout: 5000 });
  const axis = await page.$$eval('#d-timeline .axis span', (ss) => ss.map((x) => x.textContent));
  check(axis.length === 6 && axis[5] === 'now' && axis[0] === '−30s', `the detail timeline has a time axis over the window: ${axis}`);
  const changes = await page.$$eval('#d-timeline .changes li', (lis) => lis.map((li) => li.textContent));
  check(changes.some((c) => c.endsWith('ready') && !c.endsWith('not ready')), `the detail lists checkout's change to ready: ${changes}`);
  await page.keyboard.press('Escape');
  await page.waitForSelector('#detail', { state: 'hidden' });

  // A liveness probe's first pass changes no readiness: no ready badge.
  await page.click('#viewport .row[data-name="api"]');
  await page.waitForFunction(() => [...document.querySelectorAll('#d-events .ev')].some((e) => e.textContent.includes('liveness passed for the first time')), null, { timeout: 10000 });
  const firstPass = await page.$$eval('#d-events .ev', (lis) => lis.filter((li) => li.textContent.includes('liveness passed for the first time')).map((li) => li.querySelectorAll('.pill.ready, .pill.notready').length));
  check(firstPass.length === 1 && firstPass[0] === 0, `"liveness passed for the first time" wears no ready/not ready badge: ${firstPass}`);
  await page.keyboard.press('Escape');
  await page.waitForSelector('#detail', { state: 'hidden' });
  log('the detail panel shows the spec, the readiness timeline and the transitions');

  // 7. probed restarts: the page resumes from its last revision and sees
  // what changed (legacy deleted: terminating during its preStop sleep).
  const before = streams.length;
  check((await ask('restart')) === 'ok', 'the Go test restarted probed');
  await page.waitForFunction(() => document.querySelector('#conn.live') && document.querySelector('#n-terminating').textContent === '1', null, { timeout: 30000 });
  await page.waitForSelector('#viewport .row.terminating[data-name="legacy"]', { timeout: 5000 });
  await page.waitForSelector('#feed li[data-name="legacy"]', { timeout: 5000 });
  const resumed = await Promise.all(streams.slice(before));
  check(resumed.some((s) => s.status === 200) && resumed.every((s) => s.status !== 200 || s.lastEventId || s.url.includes('after=')),
    `after the restart the page resumed by revision: ${JSON.stringify(resumed)}`);
  check(await count(page, 'n-all') === EXPECT_TARGETS, 'no target lost or duplicated across the restart');
  check((await rows(page)).some((r) => r.name === 'checkout' && r.cls.includes('ready')), 'checkout is still ready');
  log(`resumed after the restart with ${resumed.filter((s) => s.status === 200).map((s) => (s.lastEventId ? `Last-Event-ID ${s.lastEventId}` : s.url)).join(', ')}`);

  // 8. cache flaps (its backend is down 2s in 6s): its timeline shows it.
  await page.waitForFunction(() => {
    const row = document.querySelector('#viewport .row[data-name="cache"]');
    return row && row.querySelectorAll('svg.tl rect.s0').length >= 2 && row.querySelectorAll('svg.tl rect.s1').length >= 2 &&
      row.querySelector('.flaps');
  }, null, { timeout: 30000 });
  log(`cache's timeline: ${await page.$eval('#viewport .row[data-name="cache"] .flaps', (e) => e.parentElement.textContent)}`);

  // 9. Screenshots, with a few seconds of live figures and transitions:
  // 1,400 px, 1,280 px, and the detail panel of a flapping target.
  await page.waitForTimeout(3000);
  for (const p of SCREENSHOTS) {
    await page.screenshot({ path: p });
    log(`screenshot: ${p}`);
  }
  if (NARROW_SCREENSHOT) {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: NARROW_SCREENSHOT });
    log(`screenshot: ${NARROW_SCREENSHOT}`);
    await page.setViewportSize({ width: 1400, height: 900 });
  }
  if (DETAIL_SCREENSHOT) {
    await page.click('#viewport .row[data-name="cache"]');
    await page.waitForSelector('#d-timeline .changes li', { timeout: 5000 });
    await page.waitForFunction(() => document.querySelectorAll('#d-events .ev').length > 0, null, { timeout: 10000 });
    await page.screenshot({ path: DETAIL_SCREENSHOT });
    log(`screenshot: ${DETAIL_SCREENSHOT}`);
    await page.keyboard.press('Escape');
  }
  check(errors.length === 0, `no JavaScript errors: ${errors.join('; ')}`);
  log('PASS');
} finally {
  if (server) server.close();
  await context.close();
  stdin.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
