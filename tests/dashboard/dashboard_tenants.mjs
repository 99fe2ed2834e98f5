// Drives headless Chromium (playwright-core) over the real dashboard of a coordinator with
// credentials and checks what each kind of user can change from the page, as a user would:
//   - user "other", signed in through the form, sees tester's sweep with Cancel buttons;
//     clicking one (and confirming) shows the coordinator's refusal naming tester, the run
//     stays queued and the History table gains no row by "other";
//   - user "tester" cancels the same run (its row turns CANCELLED and offers Resume), resumes
//     it (QUEUED again), and both changes appear in History by "tester";
//   - read credential "viewer" sees History but no button;
//   - admin "operator" cancels the whole sweep, on record by "operator".
// Throughout: no page errors, and no console errors or failed requests besides other's one
// expected 403. Saves a screenshot.
//
// Usage: node dashboard_tenants.mjs PLAYWRIGHT_CORE_DIR BASE_URL SWEEP_ID TOKEN_DIR SCREENSHOT
// (TOKEN_DIR holds tester.token, other.token, viewer.token, operator.token).
// Exit 0 on success; 1 with the failed check on stderr.
import {readFileSync} from 'node:fs';
import {pathToFileURL} from 'node:url';

import {launchChromium} from './launch.mjs';

const [playwrightDir, baseUrl, sweepArg, tokenDir, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node dashboard_tenants.mjs PLAYWRIGHT_DIR BASE_URL SWEEP_ID TOKEN_DIR ' +
                'SCREENSHOT');
  process.exit(2);
}
const sweepId = Number(sweepArg);
const tokenOf = name => readFileSync(`${tokenDir}/${name}.token`, 'utf8').trim();
const {chromium} = await import(pathToFileURL(`${playwrightDir}/index.mjs`).href);

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

const browser = await launchChromium(chromium);
const page = await (await browser.newContext({viewport: {width: 1400, height: 1000}})).newPage();
const problems = [];
let expected403 = 0;  // refusals the test provokes: Chromium logs each as a failed load
page.on('pageerror', e => problems.push(`page error: ${e.message}`));
page.on('console', m => {
  if (m.type() !== 'error') return;
  if (expected403 > 0 && m.text().includes('403')) {
    expected403--;
    return;
  }
  problems.push(`console: ${m.text()}`);
});
page.on('dialog', dialog => dialog.accept());  // "Cancel run N?" — yes

// Signs in as `name` (signing out first when signed in) and opens the sweep.
async function signIn(name) {
  await page.goto(`${baseUrl}/#sweep=${sweepId}`);
  if (await page.locator('#logout:not([hidden])').count()) {
    // Signing out reloads the page: wait for the fresh one.
    await Promise.all([page.waitForEvent('load'), page.locator('#logout').click()]);
  }
  await page.waitForSelector('#login:not([hidden])', {timeout: 20000});
  await page.fill('#login input[name=token]', tokenOf(name));
  await page.locator('#login button').click();
  await page.waitForSelector(`body[data-view="sweep=${sweepId}"]`, {timeout: 20000});
  await page.waitForSelector('#runs tbody tr', {timeout: 20000});
}

const rowOf = runId => page.locator(`#runs tbody tr[data-run-id="${runId}"]`);
const stateOf = async runId => (await rowOf(runId).locator('td.state').textContent()).trim();
// Who did what, as the History table shows it: "kind by actor" per row.
const history = () => page.$$eval(
    '#history tbody tr',
    rows => rows.map(r => `${r.cells[1].textContent} by ${r.cells[3].textContent}`));
// Waits until the History table shows `entry`.
const historyShows = entry => page.waitForFunction(
    e => [...document.querySelectorAll('#history tbody tr')].some(
        r => `${r.cells[1].textContent} by ${r.cells[3].textContent}` === e),
    entry, {timeout: 20000});

try {
  // other: the buttons are there, the coordinator refuses, nothing changes.
  await signIn('other');
  const runId = Number(await page.locator('#runs tbody tr').first().getAttribute('data-run-id'));
  check(await stateOf(runId) === 'QUEUED', `run ${runId} starts queued`);
  check(await page.locator('#runs button.run-action.cancel').count() > 0,
        'a user sees Cancel buttons');
  check((await page.locator('#sweep-owner').textContent()).includes('tester'),
        'the sweep names its owner');
  expected403 = 1;
  await rowOf(runId).locator('button.run-action.cancel').click();
  await page.waitForFunction(
      () => document.querySelector('#action-message.error')?.textContent.includes(
          'belongs to user "tester"'),
      null, {timeout: 20000});
  const refusal = await page.locator('#action-message').textContent();
  check(refusal.includes('credential "other"'), `the refusal names the caller: ${refusal}`);
  await page.waitForSelector(`body[data-view="sweep=${sweepId}"]`);
  check(await stateOf(runId) === 'QUEUED', 'the refused cancel changed nothing');
  check(!(await history()).some(e => e.endsWith('by other')), 'no change by other on record');
  check(expected403 === 0, 'the refusal was the one failed request');

  // tester: cancel, then resume, both on record.
  await signIn('tester');
  await rowOf(runId).locator('button.run-action.cancel').click();
  await page.waitForFunction(id => document.querySelector(
      `#runs tr[data-run-id="${id}"] td.state`)?.textContent.startsWith('CANCELLED'),
      runId, {timeout: 20000});
  check(!(await page.locator('#action-message').getAttribute('class') || '').includes('error'),
        'the owner\'s cancel is no error');
  await rowOf(runId).locator('button.run-action.resume').click();
  await page.waitForFunction(id => document.querySelector(
      `#runs tr[data-run-id="${id}"] td.state`)?.textContent.startsWith('QUEUED'),
      runId, {timeout: 20000});
  await historyShows('run_cancelled by tester');
  await historyShows('run_resumed by tester');

  // viewer: reads only.
  await signIn('viewer');
  check(await page.locator('#runs button.run-action').count() === 0, 'a reader sees no button');
  check(await page.locator('#sweep-cancel').isHidden(), 'a reader sees no Cancel sweep');
  check((await history()).includes('sweep_submitted by tester'), 'a reader sees the history');

  // operator: an admin cancels another user's sweep.
  await signIn('operator');
  await page.locator('#sweep-cancel').click();
  await historyShows('sweep_cancelled by operator');
  await page.waitForFunction(id => document.querySelector(
      `#runs tr[data-run-id="${id}"] td.state`)?.textContent.startsWith('CANCELLED'),
      runId, {timeout: 20000});
  await page.screenshot({path: screenshot, fullPage: true});
  check(problems.length === 0, `no console or page errors:\n${problems.join('\n')}`);
  console.log(`dashboard tenants: refusal "${refusal}"; history: ${(await history()).join('; ')}`);
} catch (e) {
  console.error(e.message);
  if (problems.length) console.error(problems.join('\n'));
  await page.screenshot({path: screenshot, fullPage: true}).catch(() => {});
  await browser.close();
  process.exit(1);
}
await browser.close();
