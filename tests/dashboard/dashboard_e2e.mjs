// Drives headless Chromium (playwright-core) over the real dashboard of a coordinator whose
// sweep has finished, and checks what a user sees: the login form (the token typed into it
// becomes an HttpOnly, SameSite=Strict session cookie, never part of a URL or readable by the
// page's scripts), the sweep in the list, one SUCCEEDED
// row per run, one multi-point loss curve per run, the series switch redrawing the chart,
// the law-fit panel showing /api/sweeps/{id}/fit, the recommendation form answering (also
// under a parameter cap), the study in the study list and its fit panel showing
// /api/studies/{name}/fit, no console errors and no failed requests. Saves a full-page
// screenshot.
//
// Usage: node dashboard_e2e.mjs PLAYWRIGHT_CORE_DIR BASE_URL SWEEP_ID RUN_COUNT SCREENSHOT
//        TOKEN_FILE STUDY
// Exit 0 on success; 1 with the failed check on stderr.
import {readFileSync} from 'node:fs';
import {pathToFileURL} from 'node:url';

const [playwrightDir, baseUrl, sweepArg, runsArg, screenshot, tokenFile, study] =
    process.argv.slice(2);
if (!study) {
  console.error(
      'usage: node dashboard_e2e.mjs PLAYWRIGHT_DIR BASE_URL SWEEP_ID RUNS SCREENSHOT ' +
      'TOKEN_FILE STUDY');
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

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'
  ],
});
const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
try {
  page.on('pageerror', error => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', request => {
    problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`);
  });
  page.on('response', response => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()}: ${response.url()}`);
  });
  page.on('console', message => {
    if (message.type() === 'error') {
      problems.push(`console error: ${message.text()} (${message.location().url || ''})`);
    }
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
  const item = page.locator(`#sweep-list li[data-sweep-id="${sweepId}"]`);
  await item.waitFor({timeout: 10000});
  check((await item.textContent()).includes('dash-e2e'), 'sweep list item names the sweep');
  await item.click();
  await page.waitForFunction(id => location.hash === `#sweep=${id}`, sweepId);

  // Runs table: one row per run, each SUCCEEDED with a full progress bar.
  await page.waitForFunction(
      n => document.querySelectorAll('#runs tbody tr').length === n, runCount, {timeout: 10000});
  const rows = await page.$$eval(
      '#runs tbody tr', trs => trs.map(tr => ({
                                         cells: [...tr.cells].map(td => td.textContent.trim()),
                                         bar: tr.querySelector('.bar > div')?.style.width,
                                       })));
  for (const row of rows) {
    check(row.cells[8] === 'SUCCEEDED', `run ${row.cells[1]} is SUCCEEDED (got ${row.cells[8]})`);
    check(parseFloat(row.bar) >= 95, `run ${row.cells[1]} progress bar full (${row.bar})`);
    check(Number(row.cells[11]) > 0, `run ${row.cells[1]} shows a final val loss`);
  }
  const phis = rows.map(r => r.cells[7]);
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
  console.log(
      `dashboard OK in ${((Date.now() - started) / 1000).toFixed(1)} s: ` +
      `${rows.length} runs, curves ${val.map(c => c.points)} (val) ` +
      `${train.map(c => c.points)} (train) points; fit: ${fitSummary}`);
} catch (error) {
  console.error(error.message);
  await page.screenshot({path: screenshot, fullPage: true}).catch(() => {});
  console.error(`page at the failure: ${screenshot}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
