// actions.js — what a signed-in user may change from the dashboard, and who changed what:
// the sweep's "Cancel sweep" and "Retry failed runs" buttons, each run's Cancel or Resume
// button (the runs table's last column), and the sweep's history (GET
// /api/sweeps/{id}/history: every event with the credential that made it). Changes are
// POSTed through Xmod.post (coordinator/api/http_actions.h); the coordinator decides whose
// work a caller may change, and its refusal (403, naming the owner) is shown as it came.
// Buttons appear only for a session that may change anything (a user or admin credential,
// or a coordinator without credentials); a read credential sees the history alone.
'use strict';

const XmodActions = (() => {
  const HISTORY_LIMIT = 50;
  const ACTIVE = new Set(['QUEUED', 'RUNNING']);
  const RESUMABLE = new Set(['FAILED', 'CANCELLED']);
  let mayChange = false;
  let hooks = {changed: async () => {}};

  // What the session may do: {required, scope} of /api/session.
  function setSession(session) {
    mayChange = !session.required || session.scope === 'user' || session.scope === 'admin';
  }

  function message(text, failed) {
    const box = document.getElementById('action-message');
    box.textContent = text;
    box.className = failed ? 'error' : 'done';
  }

  // Runs one change: confirms when asked to, POSTs, reports, then lets the page refresh.
  async function act(path, done, question) {
    if (question && !window.confirm(question)) return;
    try {
      const answer = await Xmod.post(path);
      message(done(answer), false);
    } catch (error) {
      message(error.message, true);
    }
    await hooks.changed();
  }

  // The sweep's header: its owner, and its buttons for a session that may change things.
  function renderSweep(sweep) {
    const id = Number(sweep.id);
    document.getElementById('sweep-owner').textContent =
        `submitted by ${sweep.submitter || '(anonymous)'}`;
    const box = document.getElementById('sweep-actions');
    const active = (sweep.run_counts.QUEUED || 0) + (sweep.run_counts.RUNNING || 0) > 0;
    const cancel = document.getElementById('sweep-cancel');
    const retry = document.getElementById('sweep-retry');
    cancel.hidden = !mayChange || !active;
    retry.hidden = !mayChange || !sweep.run_counts.FAILED;
    cancel.onclick = () => act(`/api/sweeps/${id}/cancel`, () => `Sweep #${id} cancelled.`,
                               `Cancel every queued or running run of sweep #${id}?`);
    retry.onclick = () => act(`/api/sweeps/${id}/retry`,
                              answer => `${(answer.run_ids || []).length} failed runs requeued.`);
    box.hidden = false;
  }

  // The runs table's last cell of `run`: Cancel while it is queued or running, Resume once
  // it failed or was cancelled.
  function runCell(tr, run) {
    const td = Xmod.cell(tr, '');
    if (!mayChange) return;
    const id = Number(run.id);
    const button = (label, verb, question) => {
      const b = td.appendChild(Xmod.node('button', `run-action ${verb}`, label));
      b.type = 'button';
      b.addEventListener('click', () => act(`/api/runs/${id}/${verb}`,
                                            answer => `Run ${id} is ${answer.state}.`, question));
    };
    if (ACTIVE.has(run.state)) button('Cancel', 'cancel', `Cancel run ${id} (${run.name})?`);
    if (RESUMABLE.has(run.state)) button('Resume', 'resume');
  }

  // Who did what to the sweep and its runs, newest first.
  async function renderHistory(sweepId) {
    const data = await Xmod.api(`/api/sweeps/${sweepId}/history?limit=${HISTORY_LIMIT}`);
    const body = document.querySelector('#history tbody');
    const rows = (data?.events || []).map(e => {
      const tr = Xmod.node('tr');
      Xmod.cell(tr, Xmod.time(e.time_unix_ms));
      Xmod.cell(tr, e.kind);
      Xmod.cell(tr, Number(e.run_id) ? e.run_id : '', 'num');
      Xmod.cell(tr, e.actor === undefined ? 'coordinator' : e.actor || '(anonymous)', 'actor');
      Xmod.cell(tr, e.text);
      return tr;
    });
    body.replaceChildren(...rows);
  }

  function init(h) {
    hooks = h;
  }

  return {init, setSession, renderSweep, runCell, renderHistory};
})();
