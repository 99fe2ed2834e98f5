// The dashboard at a researcher's real scale, in headless Chromium (playwright-core): a sweep of
// 10,000 submitted runs (1,000 seeds x 10 K values, the spec limit; nothing trains). Checks
// what a user does with it — the first page renders (100 rows, "1–100 of 10000 runs"), the
// next page, sorting by name both ways, a filter (K), replicate grouping (10 configurations
// of 1,000 seeds, one expanded), the comparison view (a configuration, then two runs, each
// with their dense reference) —
// and then leaves the tab open for IDLE_S seconds and counts what it fetches: no runs page at
// all (updates come from the event stream, and none happen), only the small sweep and study
// documents of the 5 s loop. Prints two figures:
//   first render: ms from the runs page's responseEnd to the table rendered (performance
//     marks in the page; asserted <= 1000 ms, the target),
//   idle CPU: the CPU time (utime + stime, /proc/PID/stat) of every Chromium process (the
//     browser, renderer, GPU and utility processes: this node process's descendants) over the
//     idle window, as a share of one core (target 5%; asserted <= 25% only, as the machine's
//     load can inflate it).
//
// Usage: node dashboard_scale.mjs PLAYWRIGHT_CORE_DIR BASE_URL SWEEP_ID RUN_COUNT TOKEN_FILE
//        IDLE_S CLK_TCK
import {readdirSync, readFileSync} from 'node:fs';
import {pathToFileURL} from 'node:url';

import {launchChromium} from './launch.mjs';

const [playwrightDir, baseUrl, sweepArg, runsArg, tokenFile, idleArg, tickArg] =
    process.argv.slice(2);
if (!tickArg) {
  console.error('usage: node dashboard_scale.mjs PLAYWRIGHT_DIR BASE_URL SWEEP_ID RUNS ' +
                'TOKEN_FILE IDLE_S CLK_TCK');
  process.exit(2);
}
const sweepId = Number(sweepArg);
const runCount = Number(runsArg);
const idleSeconds = Number(idleArg);
const ticksPerSecond = Number(tickArg);
const token = readFileSync(tokenFile, 'utf8').trim();
const {chromium} = await import(pathToFileURL(`${playwrightDir}/index.mjs`).href);

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

// CPU ticks (utime + stime) of every descendant of this process: the browser's processes.
function browserTicks() {
  const parent = new Map();
  const ticks = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');  // from field 3 on
      parent.set(Number(name), Number(fields[1]));
      ticks.set(Number(name), Number(fields[11]) + Number(fields[12]));
    } catch (_) {
      // The process ended while the table was read.
    }
  }
  let total = 0, processes = 0;
  for (const [pid, value] of ticks) {
    for (let p = parent.get(pid); p; p = parent.get(p)) {
      if (p === process.pid) {
        total += value;
        processes += 1;
        break;
      }
    }
  }
  return {total, processes};
}

const rowsText = page => page.$$eval('#runs tbody tr', trs => trs.map(tr => ({
                                                           id: tr.dataset.runId,
                                                           group: tr.dataset.groupKey,
                                                           cells: [...tr.cells].map(
                                                               td => td.textContent.trim()),
                                                         })));
const waitPage = (page, view) =>
    page.waitForFunction(v => (document.body.dataset.runsPage || '') === v, view,
                         {timeout: 20000});

const browser = await launchChromium(chromium);
const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
const problems = [];
const requests = [];  // {path, bytes} of every /api/ response
let where = 'login';
try {
  page.on('pageerror', error => problems.push(`[${where}] page error: ${error.stack}`));
  page.on('console', m => m.type() === 'error' && problems.push(`[${where}] ${m.text()}`));
  page.on('response', async response => {
    const url = new URL(response.url());
    if (!url.pathname.startsWith('/api/')) return;
    if (response.status() >= 400 && !/\/fit$/.test(url.pathname)) {
      problems.push(`[${where}] HTTP ${response.status()}: ${url.pathname}${url.search}`);
    }
    if (url.pathname.endsWith('/events')) {
      requests.push({path: url.pathname, bytes: 0});
      return;
    }
    const body = await response.body().catch(() => Buffer.alloc(0));
    requests.push({path: url.pathname, search: url.search, bytes: body.length});
  });

  await page.goto(`${baseUrl}/`);
  await page.waitForSelector('#login:not([hidden])', {timeout: 20000});
  await page.fill('#login input[name=token]', token);
  await page.locator('#login button').click();
  await page.waitForSelector('body[data-loaded=true]', {timeout: 20000});

  // First render: the first page, measured in the page from the API's answer to the table.
  where = `sweep ${sweepId}`;
  await page.locator(`#sweep-list li[data-sweep-id="${sweepId}"]`).click();
  await waitPage(page, `${sweepId}:0:id:asc:runs:100`);
  const firstRenderMs = await page.evaluate(id => {
    const fetched = performance.getEntriesByType('resource')
                        .filter(e => e.name.includes(`/api/sweeps/${id}/runs`))
                        .pop();
    const rendered = performance.getEntriesByName('xmod-runs-rendered').pop();
    return rendered.startTime - fetched.responseEnd;
  }, sweepId);
  check((await page.textContent('#runs-page')) === `1–100 of ${runCount} runs`,
        `the pager counts every run (${await page.textContent('#runs-page')})`);
  const first = await rowsText(page);
  check(first.length === 100, `one page of 100 rows (${first.length})`);

  // The next page: 100 other runs.
  await page.locator('#runs-next').click();
  await waitPage(page, `${sweepId}:1:id:asc:runs:100`);
  const second = await rowsText(page);
  check(second.every(r => !first.some(f => f.id === r.id)), 'the next page holds other runs');
  check(Number(second[0].id) > Number(first[99].id), 'the next page continues the order');
  check((await page.textContent('#runs-page')) === `101–200 of ${runCount} runs`, 'pager: page 2');

  // Sorting by name, then reversed (the server's order: bytewise).
  await page.locator('#runs th[data-sort=name]').click();
  await waitPage(page, `${sweepId}:0:name:asc:runs:100`);
  const byName = (await rowsText(page)).map(r => r.cells[2]);
  check(byName.every((n, i) => i === 0 || byName[i - 1] <= n), 'sorted by name');
  await page.locator('#runs th[data-sort=name]').click();
  await waitPage(page, `${sweepId}:0:name:desc:runs:100`);
  const byNameDesc = (await rowsText(page)).map(r => r.cells[2]);
  check(byNameDesc.every((n, i) => i === 0 || byNameDesc[i - 1] >= n), 'sorted by name, desc');
  check(byNameDesc[0] > byName[99], 'descending starts at the other end');

  // A filter: K = 4 is 1,000 of the runs.
  await page.fill('#run-filters input[data-filter=k]', '4');
  await page.waitForFunction(() => /of 1000 runs$/.test(
                                 document.getElementById('runs-page').textContent),
                             null, {timeout: 20000});
  const k4 = await rowsText(page);
  check(k4.length === 100 && k4.every(r => r.cells[4] === '4'), 'every row shown has K = 4');
  await page.fill('#run-filters input[data-filter=k]', '');
  await page.waitForFunction(
      n => document.getElementById('runs-page').textContent.endsWith(`of ${n} runs`), runCount,
      {timeout: 20000});

  // Replicates grouped: ten configurations of 1,000 seeds; one expanded to its seeds.
  await page.locator('#group-replicates').check();
  await waitPage(page, `${sweepId}:0:name:desc:groups:10`);
  const groups = await rowsText(page);
  check(groups.length === 10 && groups.every(r => r.cells[1] === '▸ 1000'),
        `10 configurations of 1000 seeds (${groups.map(r => r.cells[1])})`);
  check(!groups.some(r => /-s\d+$/.test(r.cells[2])), 'configurations are named without seeds');
  await page.locator('#runs tr.group button.expand').first().click();
  await page.waitForFunction(() => document.querySelectorAll('#runs tr.seed').length === 1000,
                             null, {timeout: 20000});
  // A picked configuration: its first 12 seeds and their dense reference; then cleared.
  await page.locator('#runs tr.group input.pick').first().check();
  await page.waitForFunction(() => !document.getElementById('compare').hidden &&
                                 document.getElementById('compare-chart').dataset.series === '13',
                             null, {timeout: 20000});
  check(/\(12 of 1000 seeds\)/.test(await page.textContent('#compare-legend')),
        'the legend says how many seeds are drawn');
  await page.locator('#compare-clear').click();
  await page.waitForSelector('#compare[hidden]', {state: 'attached', timeout: 5000});
  await page.locator('#group-replicates').uncheck();
  await waitPage(page, `${sweepId}:0:name:desc:runs:100`);

  // Compare two sparse runs: their curves and their dense reference (drawn dashed).
  const picks = page.locator('#runs tbody tr input.pick');
  await picks.nth(0).check();
  await picks.nth(1).check();
  await page.waitForFunction(() => !document.getElementById('compare').hidden &&
                                 document.getElementById('compare-chart').dataset.series === '3',
                             null, {timeout: 20000});
  const legend = await page.textContent('#compare-legend');
  check(/dense reference dense-/.test(legend), `the dense reference is drawn (${legend})`);
  check(problems.length === 0, `no errors:\n  ${problems.join('\n  ')}`);

  // The tab left open: what it fetches and the CPU its processes use.
  where = 'idle';
  requests.length = 0;
  const before = browserTicks();
  const started = Date.now();
  await page.waitForTimeout(idleSeconds * 1000);
  const after = browserTicks();
  const wall = (Date.now() - started) / 1000;
  const cpu = (after.total - before.total) / ticksPerSecond / wall;
  const runsFetches = requests.filter(r => /\/runs$/.test(r.path));
  const bytes = requests.reduce((a, r) => a + r.bytes, 0);
  check(runsFetches.length === 0,
        `no runs page fetched while idle (${runsFetches.map(r => r.path + r.search)})`);
  check(bytes < 2 << 20, `under 2 MiB fetched while idle (${bytes} bytes)`);
  check(firstRenderMs <= 1000, `first render within 1 s of the API's answer (${firstRenderMs} ms)`);
  check(cpu <= 0.25, `idle CPU within 25% of a core (${(100 * cpu).toFixed(1)}%)`);
  check(problems.length === 0, `no errors:\n  ${problems.join('\n  ')}`);
  const paths = [...new Set(requests.map(r => r.path))].join(', ');
  console.log(`dashboard at ${runCount} runs OK: first render ${firstRenderMs.toFixed(1)} ms ` +
              `after the API answered (target <= 1000 ms); idle ${wall.toFixed(1)} s: CPU ` +
              `${(100 * cpu).toFixed(2)}% of a core over ${after.processes} browser processes ` +
              `(target <= 5%), ${requests.length} /api requests, ${bytes} bytes (${paths}), ` +
              'no runs page re-fetched');
} catch (error) {
  console.error(`[${where}] ${error.message}`);
  if (problems.length) console.error(`problems so far:\n  ${problems.join('\n  ')}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
