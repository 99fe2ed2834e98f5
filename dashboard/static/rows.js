// rows.js — the rows of the dashboard's runs table: one run (its model, state, progress,
// losses, live Δ, zero-shot results and a compare checkbox) or one configuration of
// replicate seeds (its state counts and the seeds' val loss and live Δ as mean ± sd, n; a
// button that shows its seeds). The latest cached metric values come from app.js through
// init({lastValue}).
'use strict';

const XmodRows = (() => {
  let lastValue = () => undefined;

  // The arch column: MoE runs name their experts ("moe 6:128+2", paper Table 1's notation).
  function archText(model) {
    const arch = model.arch.toLowerCase();
    const moe = model.moe;
    if (model.arch !== 'MOE' || !moe || !moe.total_experts) return arch;
    return `${arch} ${moe.active_experts}:${moe.total_experts}` +
        (moe.shared_experts ? `+${moe.shared_experts}` : '');
  }

  // K and A apply to the depth-sparse archs (X-MoD, MoD and the controls), not Dense or MoE
  // (whose K, A the expander leaves at 1, 0: its sparsity is in the arch column).
  const hasKA = model => model.arch !== 'DENSE' && model.arch !== 'MOE';

  // φ/φ_D (paper Table 1): forward FLOPs per token over the Dense run's at the same backbone
  // and L in this sweep; undefined without such a Dense run.
  function phiRatio(run, runs) {
    const key = r => `${r.spec.model.backbone.name}|${r.spec.training.seq_len}`;
    const dense = runs.find(r => r.spec.model.arch === 'DENSE' && key(r) === key(run));
    return dense && dense.forward_flops_per_token ?
        run.forward_flops_per_token / dense.forward_flops_per_token :
        undefined;
  }

  // The zero-shot tasks of a run's spec (training.eval_tasks) and their metric names: each
  // metric and its standard error (eval/<task>/<metric>_stderr, as lm-evaluation-harness
  // computes it; absent where the harness reports none).
  const EVAL_METRICS = ['acc', 'acc_norm', 'ppl'];
  function evalTasks(run) {
    return (run.spec.training.eval_tasks || []).map(t => t.task);
  }
  function evalSeries(run) {
    const fields = EVAL_METRICS.flatMap(m => [m, `${m}_stderr`]).concat(['n']);
    return evalTasks(run).flatMap(task => fields.map(field => `${XmodSeries.EVAL_PREFIX}${task}/${field}`));
  }

  // "0.438 ± 0.022": a metric of a task with its standard error when there is one.
  function withStderr(id, task, metric, digits) {
    const value = lastValue(id, `${XmodSeries.EVAL_PREFIX}${task}/${metric}`);
    if (value === undefined) return undefined;
    const se = lastValue(id, `${XmodSeries.EVAL_PREFIX}${task}/${metric}_stderr`);
    return value.toFixed(digits) + (se === undefined ? '' : ` ± ${se.toFixed(digits)}`);
  }

  // "task acc ± se" per zero-shot task once the run reported it; the title adds acc_norm or
  // ppl (± se) and n.
  function renderEval(cell, run) {
    const id = Number(run.id);
    for (const task of evalTasks(run)) {
      const acc = withStderr(id, task, 'acc', 3);
      if (acc === undefined) continue;
      const norm = withStderr(id, task, 'acc_norm', 3);
      const ppl = withStderr(id, task, 'ppl', 2);
      const item = cell.appendChild(Xmod.node('div', '', `${task} ${acc}`));
      item.title = [
        norm === undefined ? '' : `acc_norm ${norm}`,
        ppl === undefined ? '' : `ppl ${ppl}`,
        `n ${lastValue(id, `${XmodSeries.EVAL_PREFIX}${task}/n`)}`,
      ].filter(Boolean).join(', ');
    }
  }

  // Why a SUCCEEDED run spent less than its budget: the trainer stops after the last whole
  // step the budget buys (Progress.planned_steps); '' for any other run.
  function endedShortNote(run, budget) {
    const progress = run.progress;
    const planned = Number(progress.planned_steps);
    if (run.state !== 'SUCCEEDED' || !planned || !(progress.flops < budget)) return '';
    return `ended at step ${progress.step} of ${planned}: budget reached in the last whole ` +
        `step (${Xmod.flops(progress.flops)} of ${Xmod.flops(budget)} FLOPs)`;
  }

  // The compare cell: a checkbox that picks what `runs()` resolves to (one run, or a
  // configuration's seeds).
  function compareCell(tr, key, label, runs) {
    const box = Xmod.cell(tr, '').appendChild(Xmod.node('input'));
    box.type = 'checkbox';
    box.className = 'pick';
    box.checked = XmodCompare.isPicked(key);
    box.title = 'compare: overlay its curves with the dense reference';
    box.addEventListener(
        'change', async () => XmodCompare.pick(key, label, await runs(), box.checked));
  }

  function runRow(run, runs, seedOf) {
    const id = Number(run.id);
    const model = run.spec.model;
    const progress = run.progress;
    const tr = Xmod.node('tr', seedOf ? 'seed' : '');
    tr.dataset.runId = id;
    compareCell(tr, `run:${id}`, run.name, () => [run]);
    Xmod.cell(tr, id, 'num');
    const name = Xmod.cell(tr, run.name);
    if (run.held_out) {
      name.appendChild(Xmod.node('span', 'tag held-out', 'held out')).title =
          'out of the fit\'s range (spec fit.held_out_*): predicted, not fitted';
    }
    if (run.error) name.appendChild(Xmod.node('div', 'error', run.error));
    Xmod.cell(tr, archText(model));
    Xmod.cell(tr, hasKA(model) && model.k ? model.k : '', 'num');
    Xmod.cell(tr, hasKA(model) && model.a ? model.a : '', 'num');  // MoD has no A (0)
    Xmod.cell(tr, run.spec.training.seq_len, 'num');
    Xmod.cell(tr, Xmod.count(run.total_params), 'num');
    const phi = phiRatio(run, runs);
    Xmod.cell(tr, phi === undefined ? '' : phi.toFixed(3), 'num');
    const stateCell = Xmod.cell(tr, run.state, `state ${run.state}`);
    stateCell.title =
        `attempt ${run.attempts}/${run.max_attempts}` + (run.worker ? ` on ${run.worker}` : '');
    if (run.preemptions) {  // PREEMPT orders (docs/operations.md, "Sharing a cluster")
      stateCell.appendChild(Xmod.node('span', 'tag preempted', `preempted ×${run.preemptions}`))
          .title = `latest: ${run.last_preemption}`;
    }
    const budget = progress.flop_budget || run.spec.training.flop_budget;
    // The coordinator's fraction: of the whole steps the budget buys, 1 once SUCCEEDED.
    const pct = 100 * (progress.fraction || 0);
    const bar = Xmod.node('div', `bar ${run.state}`);
    bar.appendChild(Xmod.node('div')).style.width = `${pct}%`;
    const progressCell = Xmod.cell(tr, '');
    const wrap = progressCell.appendChild(Xmod.node('div', 'progress'));
    wrap.append(bar, Xmod.node('span', 'pct', `${pct.toFixed(0)}%`));
    progressCell.title = `${Xmod.flops(progress.flops)} / ${Xmod.flops(budget)} FLOPs, ` +
        `step ${progress.step}, ${Xmod.count(progress.tokens)} tokens`;
    // 100% once SUCCEEDED; the read-out says why that can be short of the budget.
    const short = endedShortNote(run, budget);
    if (short) progressCell.title += `\n${short}`;
    Xmod.cell(tr, Xmod.loss(lastValue(id, XmodSeries.TRAIN_LOSS, progress.train_loss)), 'num');
    Xmod.cell(tr, Xmod.loss(lastValue(id, XmodSeries.VAL_LOSS, progress.val_loss)), 'num');
    const live = progress.live_delta;
    Xmod.cell(tr, live === undefined ? '' : (live >= 0 ? '+' : '') + live.toFixed(4), 'num')
        .title = run.censored ? 'stopped early: a censored observation, never fitted' :
                                live === undefined ? '' :
                                `at ${Xmod.flops(progress.live_delta_flops)} FLOPs`;
    Xmod.cell(tr, progress.tokens_per_second ? progress.tokens_per_second.toFixed(0) : '', 'num');
    const gpu = Xmod.cell(tr, Xmod.bytes(run.peak_gpu_memory_bytes), 'num');
    if (run.gpu_seconds) gpu.title = `${Number(run.gpu_seconds).toFixed(0)} GPU-seconds`;
    renderEval(Xmod.cell(tr, ''), run);
    XmodActions.runCell(tr, run);
    return tr;
  }

  // "mean ± sd (n)" of a replicate statistic, `digits` decimals; '' without values.
  function statText(stat, digits, signed) {
    if (!stat || !stat.n) return '';
    const mean = (signed && stat.mean >= 0 ? '+' : '') + stat.mean.toFixed(digits);
    return stat.n > 1 ? `${mean} ± ${stat.sd.toFixed(digits)} (n=${stat.n})` : `${mean} (n=1)`;
  }

  // One configuration: its first run's columns, its seeds' state counts and statistics.
  function groupRow(group, open) {
    const run = group.first;
    const model = run.spec.model;
    const tr = Xmod.node('tr', 'group');
    tr.dataset.groupKey = group.key;
    const seedsOf = () => XmodRuns.seeds(group);
    compareCell(tr, `group:${group.key}`, group.name, seedsOf);
    const toggle = Xmod.cell(tr, '', 'num').appendChild(
        Xmod.node('button', 'expand', `${open ? '▾' : '▸'} ${group.run_ids.length}`));
    toggle.title = open ? 'hide the seeds' : 'show the seeds';
    toggle.addEventListener('click', () => XmodRuns.toggle(group));
    Xmod.cell(tr, group.name);
    Xmod.cell(tr, archText(model));
    Xmod.cell(tr, hasKA(model) && model.k ? model.k : '', 'num');
    Xmod.cell(tr, hasKA(model) && model.a ? model.a : '', 'num');
    Xmod.cell(tr, run.spec.training.seq_len, 'num');
    Xmod.cell(tr, Xmod.count(run.total_params), 'num');
    Xmod.cell(tr, '');
    const counts = Object.entries(group.run_counts).sort();
    Xmod.cell(tr, counts.map(([s, n]) => `${s.toLowerCase()} ${n}`).join(', '), 'state');
    Xmod.cell(tr, '');
    Xmod.cell(tr, '');
    Xmod.cell(tr, statText(group.val_loss, 4), 'num').title = 'latest val loss of its seeds';
    Xmod.cell(tr, statText(group.live_delta, 4, true), 'num');
    Xmod.cell(tr, '');
    Xmod.cell(tr, '');
    Xmod.cell(tr, '');
    Xmod.cell(tr, '');  // actions are per run: open the group
    return tr;
  }

  function init(hooks) {
    lastValue = hooks.lastValue;
  }

  return {init, runRow, groupRow, evalSeries};
})();
