// Drives headless Chromium (playwright-core) over the real dashboard of a coordinator whose
// sweep has finished, and checks what a user sees: the login form (the token typed into it
// becomes an HttpOnly, SameSite=Strict session cookie, never part of a URL or readable by the
// page's scripts), the sweep in the list, one SUCCEEDED
// row per run with its zero-shot accuracy and standard error, one multi-point loss curve per
// run, the series switch redrawing the chart,
// the law-fit panel showing /api/sweeps/{id}/fit, the recommendation form answering (also
// under a parameter cap), the chart's hover read-out (the nearest point's series, FLOPs and
// loss) and its zoom (a drag narrows the x axis, a double-click restores it), the study in
// the study list and its fit panel showing /api/studies/{name}/fit. Then it opens every
// other sweep and every study (the shell script submitted every bundled example spec, most
// of them cancelled at once: many runs, queued and cancelled runs, no fit, held-out runs,
// MoE) and checks each renders: one row per run, no "undefined"/"NaN", no error banner.
// Throughout: no console errors, page errors or failed requests (a 404 from a fit endpoint
// is the API's "no fit yet" and expected). Saves a full-page screenshot.
//
// Usage: node dashboard_e2e.mjs PLAYWRIGHT_CORE_DIR BASE_URL SWEEP_ID RUN_COUNT SCREENSHOT
//        TOKEN_FILE STUDY [SWEEP_COUNT]
// Exit 0 on success; 1 with the failed check on stderr.
import {readFileSync} from 'node:fs';
import {pathToFileURL} from 'node:url';

import {launchChromium} from './launch.mjs';

const [playwrightDir, baseUrl, sweepArg, runsArg, screenshot, tokenFile, study, sweepsArg] =
    process.argv.slice(2);
if (!study) {
  console.error(
      'usage: node dashboard_e2e.mjs PLAYWRIGHT_DIR BASE_URL SWEEP_ID RUNS SCREENSHOT ' +
      'TOKEN_FILE STUDY [SWEEP_COUNT]');
  process.exit(2);
}
const token = readFileSync(tokenFile, 'utf8').trim();
const sweepId = Number(sweepArg);
const runCount = Number(runsArg);
const {chromium} = await import(pathToFileURL(`${playwrightDir}/index.mjs`).href);

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

const fitPath = `/api/sweeps/${sweepId}/fit`;
const problems = [];  // console errors, failed requests, HTTP errors
let where = 'login';  // the view being checked, for the problem reports
// The API answers 404 for "no fit yet" (format.js's api() reads it as null); Chromium logs
// each as a failed resource load. Any other status >= 400 is a problem.
const expected404 = url => /\/api\/(sweeps\/\d+|studies\/[A-Za-z0-9_.-]+)\/fit$/.test(
    new URL(url).pathname);

// The chart's interaction, on the drawn `curves` (from curves()): hovering a point shows its
// read-out; a drag across the middle of the plot zooms the x axis in; a double-click resets.
async function checkChart(curves) {
  const svg = page.locator('#curves');
  await svg.scrollIntoViewIfNeeded();  // the mouse reaches only what the viewport shows
  // The client position of a curve's point (its path's vertex, in viewBox units).
  const target = curves[0].d.match(/[ML]([\d.]+),([\d.]+)/g).map(
      m => m.slice(1).split(',').map(Number))[1];
  const toClient = ([x, y]) => page.$eval('#curves', (el, [x, y]) => {
    const p = new DOMPoint(x, y).matrixTransform(el.getScreenCTM());
    return [p.x, p.y];
  }, [x, y]);
  const [cx, cy] = await toClient(target);
  await page.mouse.move(cx, cy);
  const tooltip = page.locator('#curves g.tooltip');
  await tooltip.waitFor({timeout: 5000});
  const tip = await tooltip.evaluate(g => ({
    text: [...g.querySelectorAll('text')].map(t => t.textContent),
    label: g.dataset.label,
    flops: Number(g.dataset.flops),
    value: Number(g.dataset.value),
  }));
  const ring = await page.$eval('#curves g.overlay circle', c => [Number(c.getAttribute('cx')),
                                                                   Number(c.getAttribute('cy'))]);
  check(Math.hypot(ring[0] - target[0], ring[1] - target[1]) < 1.5,
        `hover marks the nearest point (${ring} vs ${target})`);
  check(curves.some(c => c.label === tip.label) && tip.text[0] === tip.label,
        `tooltip names a series (${tip.text})`);
  check(tip.text.some(t => t.startsWith('C = ') && t.endsWith('FLOPs')) &&
            tip.text.some(t => t === `train/loss = ${tip.value.toFixed(4)}`) && tip.flops > 0,
        `tooltip shows the point's FLOPs and loss (${tip.text})`);
  await page.mouse.move(5, 5);  // off the chart: the read-out goes
  await page.waitForSelector('#curves g.tooltip', {state: 'detached', timeout: 5000});

  // Drag from 30% to 65% of the plot's width: the x range narrows to about that.
  const range = () => svg.evaluate(el => [Number(el.dataset.xMin), Number(el.dataset.xMax)]);
  const ticks = () => page.$$eval('#curves text.xtick', ts => ts.map(t => t.textContent).join(' '));
  const before = await range();
  const ticksBefore = await ticks();
  const [left, top] = await toClient([60, 14]);  // chart.js's plot area: LEFT, TOP ...
  const [right, bottom] = await toClient([880, 336]);  // ... W - RIGHT, H - BOTTOM
  const y = (top + bottom) / 2;
  await page.mouse.move(left + 0.30 * (right - left), y);
  await page.mouse.down();
  await page.mouse.move(left + 0.50 * (right - left), y, {steps: 4});
  check(await page.locator('#curves g.overlay rect.selection').count() === 1,
        'dragging shows the selection');
  await page.mouse.move(left + 0.65 * (right - left), y, {steps: 4});
  await page.mouse.up();
  await page.waitForSelector('#curves[data-zoomed=true]', {timeout: 5000});
  const zoomed = await range();
  const decades = r => Math.log10(r[1]) - Math.log10(r[0]);
  check(zoomed[0] > before[0] && zoomed[1] < before[1] &&
            Math.abs(decades(zoomed) / decades(before) - 0.35) < 0.03,
        `a drag over 35% of the plot zooms x to 35% of its range (${before} -> ${zoomed})`);
  check((await ticks()) !== ticksBefore, 'the x axis is relabelled after the zoom');
  check(await page.locator('#curves path.curve').count() === curves.length,
        'every curve is still drawn (clipped) when zoomed');
  // The periodic refresh redraws the chart (new elements): the zoom must survive it.
  await page.$$eval(
      '#curves path.curve', paths => paths.forEach(p => p.dataset.beforeRefresh = ''));
  await page.waitForFunction(
      () => document.querySelector('#curves path.curve') &&
          !document.querySelector('#curves path.curve[data-before-refresh]'),
      null, {timeout: 10000});
  check(JSON.stringify(await range()) === JSON.stringify(zoomed), 'the zoom survives a refresh');
  await page.mouse.dblclick(left + 0.5 * (right - left), y);
  await page.waitForSelector('#curves:not([data-zoomed])', {timeout: 5000});
  const reset = await range();
  check(JSON.stringify(reset) === JSON.stringify(before),
        `a double-click resets the x range (${reset} vs ${before})`);
  await page.mouse.move(5, 5);
  return `tooltip "${tip.text.join(' | ')}", zoom ${before.join('..')} -> ${zoomed.join('..')}`;
}

// The view of every sweep and study the coordinator holds besides the main sweep; the main
// sweep too once more (other sweeps' views must not leave state behind). A sweep's view:
// one row per run, every run's state shown, the fit panel in one of its states, no error
// banner, no "undefined" or "NaN" anywhere in it.
async function checkEverySweepAndStudy() {
  const sweeps = (await (await page.request.get(`${baseUrl}/api/sweeps`)).json()).sweeps;
  if (sweepsArg) {
    check(sweeps.length === Number(sweepsArg),
          `the coordinator holds ${sweepsArg} sweeps (${sweeps.length})`);
  }
  const visibleErrors = () => page.$$eval(
      '#status.failing, #detail .error, #login-error',
      els => els.filter(e => e.offsetParent && e.textContent.trim())
                 .map(e => e.textContent.trim()));
  const shapes = [];
  for (const sweep of sweeps) {
    const id = Number(sweep.id);
    where = `sweep ${id} (${sweep.name})`;
    // The table's first page (runs.js reads 100 runs a page).
    const runs =
        (await (await page.request.get(`${baseUrl}/api/sweeps/${id}/runs?page_size=100`)).json())
            .runs;
    await page.locator(`#sweep-list li[data-sweep-id="${id}"]`).click();
    await page.waitForFunction(
        ([id, n]) => document.body.dataset.view === `sweep=${id}` &&
            document.querySelectorAll('#runs tbody tr').length === n,
        [id, runs.length], {timeout: 10000});
    const adaptive = Boolean(sweep.spec.adaptive && sweep.spec.adaptive.enabled);
    if (adaptive) {
      await page.waitForFunction(() => !document.getElementById('design').hidden, null,
                                 {timeout: 10000});
    }
    const seen = await page.evaluate(() => ({
      text: document.getElementById('sweep-view').innerText,
      desc: document.getElementById('sweep-desc').textContent,
      states: [...document.querySelectorAll('#runs tbody tr')].map(tr => tr.cells[9].textContent),
      heldOut: document.querySelectorAll('#runs .held-out').length,
      fit: document.getElementById('fit').textContent,
      curves: document.querySelectorAll('#curves path.curve').length,
      design: document.getElementById('design').hidden ? null :
                                                          document.getElementById('design').textContent,
    }));
    check(!/undefined|NaN|\[object /.test(seen.text), `${where}: no undefined/NaN shown`);
    check(!/ {2}|· ·|^ ·|· $/.test(seen.desc),
          `${where}: description well-formed (${seen.desc})`);
    check(JSON.stringify(seen.states) === JSON.stringify(runs.map(r => r.state)),
          `${where}: every run's state shown`);
    check(seen.heldOut === runs.filter(r => r.held_out).length,
          `${where}: held-out runs marked (${seen.heldOut})`);
    check(/No fit yet|The law fit is off|R²_Δ =/.test(seen.fit),
          `${where}: fit panel (${seen.fit})`);
    if (adaptive) {
      check(/No decision yet|Decision \d+ \(adaptive/.test(seen.design || ''),
            `${where}: adaptive design panel (${seen.design})`);
    }
    const errors = await visibleErrors();
    check(errors.length === 0, `${where}: no error banner (${errors})`);
    const ended = runs.filter(r => r.state === 'CANCELLED').length;
    shapes.push(`#${id} ${sweep.name}: ${runs.length} runs` +
                (ended ? ` (${ended} cancelled)` : '') +
                (seen.heldOut ? `, ${seen.heldOut} held out` : '') + `, ${seen.curves} curves`);
  }
  const studies = (await (await page.request.get(`${baseUrl}/api/studies`)).json()).studies;
  for (const s of studies) {
    const name = s.spec.name;
    where = `study ${name}`;
    await page.locator(`#study-list li[data-study="${name}"]`).click();
    await page.waitForFunction(
        ([name, n]) => document.body.dataset.view === `study=${name}` &&
            document.querySelectorAll('#study-members tbody tr').length === n,
        [name, s.spec.members.length], {timeout: 10000});
    const text = await page.textContent('#study-view');
    check(!/undefined|NaN|\[object /.test(text), `${where}: no undefined/NaN shown`);
    check(/No fit yet|R²_Δ =/.test(await page.textContent('#study-fit')), `${where}: fit panel`);
    const errors = await visibleErrors();
    check(errors.length === 0, `${where}: no error banner (${errors})`);
    shapes.push(`study ${name}: ${s.spec.members.length} members`);
  }
  return shapes.join('; ');
}

const browser = await launchChromium(chromium);
const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
try {
  page.on('pageerror', error => problems.push(`[${where}] page error: ${error.stack}`));
  page.on('requestfailed', request => {
    // Selecting another sweep closes the last one's event stream: its request is aborted.
    if (/\/api\/sweeps\/\d+\/events$/.test(new URL(request.url()).pathname) &&
        request.failure()?.errorText === 'net::ERR_ABORTED') {
      return;
    }
    problems.push(`[${where}] request failed: ${request.url()} ${request.failure()?.errorText}`);
  });
  page.on('response', response => {
    const status = response.status();
    if (status >= 400 && !(status === 404 && expected404(response.url()))) {
      problems.push(`[${where}] HTTP ${status}: ${response.url()}`);
    }
  });
  page.on('console', message => {
    if (message.type() !== 'error') return;
    const url = message.location().url || '';
    if (/status of 404/.test(message.text()) && url && expected404(url)) return;
    problems.push(`[${where}] console error: ${message.text()} (${url})`);
  });

  const started = Date.now();
  await page.goto(`${baseUrl}/`);
  // Sign in: the form, not the URL, carries the token; the session is an HttpOnly cookie.
  await page.waitForSelector('#login:not([hidden])', {timeout: 20000});
  check(await page.locator('#app').isHidden(), 'the dashboard is hidden until signed in');
  await page.fill('#login input[name=token]', token);
  await page.locator('#login button').click();
  await page.waitForSelector('body[data-loaded=true]', {timeout: 20000});
  check(!page.url().includes(token), 'the token is not in the URL');
  check(
      (await page.inputValue('#login input[name=token]')) === '',
      'the token field is cleared after signing in');
  const cookies = await page.context().cookies();
  const session = cookies.find(c => c.name === 'xmod_session');
  check(session && session.httpOnly && session.sameSite === 'Strict',
        `the session cookie is HttpOnly and SameSite=Strict (${JSON.stringify(session)})`);
  check(!cookies.some(c => c.value.includes(token)), 'no cookie holds the token');
  check(
      !(await page.evaluate(() => document.cookie)).includes('xmod_session'),
      'page scripts cannot read the session');

  // The sweep list, then select the sweep by clicking it.
  where = `sweep ${sweepId}`;
  const item = page.locator(`#sweep-list li[data-sweep-id="${sweepId}"]`);
  await item.waitFor({timeout: 10000});
  check((await item.textContent()).includes('dash-e2e'), 'sweep list item names the sweep');
  await item.click();
  await page.waitForFunction(id => location.hash === `#sweep=${id}`, sweepId);

  // Runs table: one row per run, each SUCCEEDED with a full progress bar (once a refresh has
  // shown this sweep: the one shown before may have as many runs).
  await page.waitForFunction(
      ([id, n]) => document.body.dataset.view === `sweep=${id}` &&
          document.querySelectorAll('#runs tbody tr').length === n,
      [sweepId, runCount], {timeout: 10000});
  const rows = await page.$$eval(
      '#runs tbody tr', trs => trs.map(tr => ({
                                         cells: [...tr.cells].map(td => td.textContent.trim()),
                                         bar: tr.querySelector('.bar > div')?.style.width,
                                         progressTitle:
                                             tr.querySelector('.progress')?.parentElement.title,
                                       })));
  for (const row of rows) {
    check(row.cells[9] === 'SUCCEEDED', `run ${row.cells[2]} is SUCCEEDED (got ${row.cells[9]})`);
    // The coordinator's Progress.fraction: 100% once SUCCEEDED, not flops / budget (99%).
    check(parseFloat(row.bar) === 100, `run ${row.cells[2]} progress bar full (${row.bar})`);
    check(row.progressTitle.includes('FLOPs'), `run ${row.cells[2]} progress read-out (${row.progressTitle})`);
    check(Number(row.cells[12]) > 0, `run ${row.cells[2]} shows a final val loss`);
    // No GPU here: the GPU memory cell is empty (NVML measured nothing).
    check(row.cells[15] === '', `run ${row.cells[2]} shows no GPU memory on CPU (${row.cells[15]})`);
    // training.eval_tasks (gcide): the accuracy with its standard error, as the harness's.
    check(/^gcide 0\.\d{3} ± 0\.\d{3}$/.test(row.cells[16]),
          `run ${row.cells[2]} shows its zero-shot accuracy ± standard error (${row.cells[16]})`);
  }
  const phis = rows.map(r => r.cells[8]);
  check(
      phis.some(p => p === '1.000') && phis.every(p => Number(p) > 0),
      `φ/φ_D shown for every run, 1.000 for Dense (${phis})`);

  // Curves: one path per run with several points, for val/loss then train/loss.
  async function curves(series) {
    await page.waitForFunction(
        ([s, n]) => document.getElementById('curves').dataset.series === s &&
            document.querySelectorAll('#curves path.curve').length === n,
        [series, runCount], {timeout: 10000});
    return page.$$eval(
        '#curves path.curve',
        paths => paths.map(p => ({
                             label: p.dataset.label,
                             points: (p.getAttribute('d').match(/[ML]/g) || []).length,
                             d: p.getAttribute('d'),
                           })));
  }
  const val = await curves('val/loss');
  for (const c of val) check(c.points >= 3, `val/loss curve of ${c.label} has >= 3 points`);
  await page.locator('input[name=series][value="train/loss"]').check();
  const train = await curves('train/loss');
  for (const c of train) check(c.points >= 3, `train/loss curve of ${c.label} has >= 3 points`);
  check(train.some((c, i) => c.d !== val[i].d), 'switching to train/loss redrew the curves');
  check(
      (await page.textContent('#curves-title')).startsWith('Training loss'),
      'chart title follows the series');
  const chartSummary = await checkChart(train);

  // Law-fit panel: must show the sweep's fit (the shell script waited for it), and the
  // recommendation form must answer from it.
  const fitResponse = await page.request.get(`${baseUrl}${fitPath}`);
  const fitBody = await fitResponse.json();
  const fitText = await page.textContent('#fit');
  check(fitResponse.ok(), `fit API answered ${fitResponse.status()}`);
  check(fitText.includes(`R²_Δ = ${fitBody.r2.toFixed(4)}`), `fit panel shows R² (${fitText})`);
  check(
      await page.locator('#fit table.params tr[data-param]').count() === 10,
      'fit panel lists the 10 law parameters');
  if (fitBody.error) check(fitText.includes(fitBody.error), 'fit panel shows the fit error');
  await page.locator('#recommend button').click();
  await page.waitForSelector('#recommendation .best, #recommendation .error');
  const answer = await page.textContent('#recommendation p');
  check(/K\* = \d+, A\* = /.test(answer), `recommendation shown (got "${answer}")`);
  // Again under a cap on total parameters (paper B.3): the answer must respect it.
  const cap = 150000;
  await page.fill('#recommend input[name=max_total_params]', String(cap));
  await page.locator('#recommend button').click();
  await page.waitForFunction(
      () => document.querySelector('#recommendation .best, #recommendation .error'));
  const capped = await page.textContent('#recommendation p');
  const cappedN = Number(await page.getAttribute('#recommendation .best', 'data-total-params'));
  check(cappedN > 0 && cappedN <= cap, `capped recommendation has N <= ${cap} (${capped})`);
  const fitSummary = `R²_Δ ${fitBody.r2.toFixed(3)} on ${fitBody.n_obs} observations; ${answer}; ` +
      `with N <= ${cap}: ${capped}`;

  // The study (the shell script waited for its fit): listed, and its panel shows the fit.
  where = `study ${study}`;
  await page.locator(`#study-list li[data-study="${study}"]`).click();
  await page.waitForSelector('#study-view:not([hidden]) #study-fit table.params');
  const studyFit = await (await page.request.get(`${baseUrl}/api/studies/${study}/fit`)).json();
  const studyText = await page.textContent('#study-fit');
  check(
      studyText.includes(`R²_Δ = ${studyFit.r2.toFixed(4)}`),
      `study fit panel shows R² (${studyText})`);
  check(studyText.includes('stages by sweep'), `study fit is by sweep (${studyText})`);
  check(
      (await page.textContent('#study-members')).includes('kxl'),
      'study members list the role');

  await page.screenshot({path: screenshot, fullPage: true});
  check(problems.length === 0, `no console errors or failed requests:\n  ${problems.join('\n  ')}`);
  const mainSeconds = (Date.now() - started) / 1000;
  const shapes = await checkEverySweepAndStudy();
  check(problems.length === 0, `no console errors or failed requests:\n  ${problems.join('\n  ')}`);
  console.log(
      `dashboard OK in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
      `(main sweep ${mainSeconds.toFixed(1)} s): ` +
      `${rows.length} runs, curves ${val.map(c => c.points)} (val) ` +
      `${train.map(c => c.points)} (train) points; chart: ${chartSummary}; fit: ${fitSummary}\n` +
      `other views: ${shapes}`);
} catch (error) {
  console.error(`[${where}] ${error.message}`);
  if (problems.length) console.error(`problems so far:\n  ${problems.join('\n  ')}`);
  await page.screenshot({path: screenshot, fullPage: true}).catch(() => {});
  console.error(`page at the failure: ${screenshot}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
