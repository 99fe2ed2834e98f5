"""Client: the coordinator's user API (xmod.v1.Coordinator) from Python.

Connection and credentials follow xmodctl (docs/security.md): the address from `addr` or
XMOD_ADDR (default 127.0.0.1:7070); the bearer token from `token`, else the file `token_file`
or XMOD_TOKEN_FILE, else XMOD_TOKEN itself, sent as "authorization: Bearer TOKEN" metadata on
every call; TLS with `tls_ca` (XMOD_TLS_CA) or the system roots (`tls=True`), and a client
certificate for mutual TLS with `tls_cert`/`tls_key` (XMOD_TLS_CERT/XMOD_TLS_KEY). Message
limits are those of common/transport.h (16 MiB requests, 64 MiB responses).

Single documents (a sweep, a run, a fit, a plan) come back as dicts in protobuf's JSON
mapping with .proto field names and defaults included (xmod.messages.to_dict): the documents
`xmodctl ... -o json` prints. Listings and series come back as pandas DataFrames
(xmod.frames). Every failure raises xmod.XmodError with the gRPC code and the coordinator's
message. A Client may be shared between threads (grpc channels are thread-safe).
"""
import itertools
import numbers
import os
import time

import grpc

from xmod import frames
from xmod.errors import XmodError, invalid_argument
from xmod.messages import absolutize_data_globs, parse_message, to_dict
from xmod.v1 import coordinator_pb2 as pb
from xmod.v1 import coordinator_pb2_grpc
from xmod.v1 import pilot_pb2, run_pages_pb2, sharing_pb2, spec_pb2, types_pb2

DEFAULT_ADDR = "127.0.0.1:7070"  # xmodctl's default (cli/app.h)
MAX_REQUEST_BYTES = 16 << 20     # common/transport.h
MAX_RESPONSE_BYTES = 64 << 20


def read_token(token=None, token_file=None):
    """The bearer token as xmodctl finds it: `token`, else the stripped contents of
    `token_file` or of the file XMOD_TOKEN_FILE names, else XMOD_TOKEN, else "" (no
    credentials). INVALID_ARGUMENT for an empty token file, NOT_FOUND for a missing one."""
    if token:
        return token.strip()
    path = os.path.expanduser(token_file or os.environ.get("XMOD_TOKEN_FILE", ""))
    if not path:
        return os.environ.get("XMOD_TOKEN", "")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as e:
        raise XmodError(grpc.StatusCode.NOT_FOUND, f"token file {path}: {e.strerror}") from None
    if not text:
        raise invalid_argument(f"token file {path} is empty")
    return text


def _read_pem(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise invalid_argument(f"{what} {path}: {e.strerror}") from None


def _ids(values):
    if isinstance(values, (numbers.Integral, str)):
        return [int(values)]
    return [int(v) for v in values]


_ENDED = (types_pb2.SWEEP_DONE, types_pb2.SWEEP_FAILED, types_pb2.SWEEP_CANCELLED)


def _states(values):
    """RunState numbers of names ("failed", "QUEUED") or numbers; one or a list."""
    if isinstance(values, (str, numbers.Integral)):
        values = [values]
    try:
        return [int(v) if isinstance(v, numbers.Integral) else types_pb2.RunState.Value(
            str(v).upper()) for v in values or []]
    except ValueError:
        raise invalid_argument(f"states: unknown run state in {values!r} (queued, running, "
                               "succeeded, failed, cancelled)") from None


_RUNS_PAGE_SIZE = 1000  # the coordinator's largest page (coordinator/api/run_listing.h)


def _enum_values(enum, field, values, prefix=""):
    """Numbers of enum values named without their prefix ("xmod", "val_loss"), or numbers."""
    if isinstance(values, (str, numbers.Integral)):
        values = [values]
    try:
        return [int(v) if isinstance(v, numbers.Integral) else enum.Value(
            prefix + str(v).upper()) for v in values or []]
    except ValueError:
        raise invalid_argument(f"{field}: unknown value in {values!r}") from None


def _listed(values):
    return [values] if isinstance(values, (str, numbers.Number)) else list(values or [])


def _list_runs_request(sweep_id=None, *, states=None, limit=0, arch=None, k=None, a=None,
                       seq_len=None, backbone=None, label=None, name="", sort="id",
                       descending=False, group=None, page_size=0):
    """The ListRunsRequest of Client.runs' arguments (run_pages.proto)."""
    filters = run_pages_pb2.RunFilters(
        archs=_enum_values(spec_pb2.Architecture, "arch", arch),
        ks=[int(v) for v in _listed(k)], seq_lens=[int(v) for v in _listed(seq_len)],
        backbones=_listed(backbone), labels=_listed(label), name_contains=name or "")
    getattr(filters, "as").extend(float(v) for v in _listed(a))
    return pb.ListRunsRequest(
        sweep_id=int(sweep_id or 0), states=_states(states), limit=limit, filters=filters,
        sort=_enum_values(run_pages_pb2.RunSortKey, "sort", sort, "RUN_SORT_")[0], descending=descending,
        group=_enum_values(run_pages_pb2.RunGrouping, "group", group or "none", "RUN_GROUPING_")[0],
        page_size=page_size)


class Client:
    """A connection to one coordinator (see the module docstring).

    Args:
      addr: "host:port" of the coordinator's gRPC port (default XMOD_ADDR, else
        127.0.0.1:7070).
      token: the bearer token itself; token_file: a file holding it (default
        XMOD_TOKEN_FILE, then XMOD_TOKEN).
      tls: TLS with the system's root CAs; tls_ca: a PEM CA to verify the coordinator with
        (implies TLS; default XMOD_TLS_CA); tls_cert, tls_key: a client certificate and key
        for mutual TLS (default XMOD_TLS_CERT, XMOD_TLS_KEY).
      timeout: seconds each unary call may take (None = no deadline); streams have none.
      channel: a grpc.Channel to use instead of dialling addr (tests).
    """

    def __init__(self, addr=None, token=None, *, token_file=None, tls=False, tls_ca=None,
                 tls_cert=None, tls_key=None, timeout=30.0, channel=None):
        self.addr = addr or os.environ.get("XMOD_ADDR") or DEFAULT_ADDR
        self.timeout = timeout
        token = read_token(token, token_file)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = channel or self._dial(tls, tls_ca, tls_cert, tls_key)
        self._stub = coordinator_pb2_grpc.CoordinatorStub(self._channel)

    def _dial(self, tls, tls_ca, tls_cert, tls_key):
        tls_ca = tls_ca or os.environ.get("XMOD_TLS_CA")
        tls_cert = tls_cert or os.environ.get("XMOD_TLS_CERT")
        tls_key = tls_key or os.environ.get("XMOD_TLS_KEY")
        options = [("grpc.max_send_message_length", MAX_REQUEST_BYTES),
                   ("grpc.max_receive_message_length", MAX_RESPONSE_BYTES)]
        if bool(tls_cert) != bool(tls_key):
            raise invalid_argument("tls_cert and tls_key must be given together")
        if not (tls or tls_ca or tls_cert):
            return grpc.insecure_channel(self.addr, options=options)
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_pem(tls_ca, "tls_ca") if tls_ca else None,
            private_key=_read_pem(tls_key, "tls_key") if tls_key else None,
            certificate_chain=_read_pem(tls_cert, "tls_cert") if tls_cert else None)
        return grpc.secure_channel(self.addr, credentials, options=options)

    def close(self):
        """Closes the channel; the client cannot be used afterwards."""
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise XmodError.from_rpc(e, self.addr) from None

    # Sweeps.

    def submit(self, spec, dry_run=False, *, base_dir=None):
        """Submits a sweep; returns the SubmitSweepResponse dict ({"sweep_id": "7",
        "runs": [...]}; sweep_id "0" on dry_run, when nothing is stored).

        spec: a SweepSpec, a dict, a spec file's path or spec text (xmod.messages). Relative
        data globs are made absolute against base_dir (default: the working directory), as
        xmodctl does. An invalid spec raises XmodError(INVALID_ARGUMENT) naming the field.
        """
        message = parse_message(spec, spec_pb2.SweepSpec, "spec")
        absolutize_data_globs(message, base_dir)
        request = pb.SubmitSweepRequest(spec=message, dry_run=dry_run)
        return to_dict(self._call(self._stub.SubmitSweep, request))

    def sweeps(self, limit=0):
        """All sweeps, newest first, as a DataFrame (xmod.frames.sweeps_frame)."""
        response = self._call(self._stub.ListSweeps, pb.ListSweepsRequest(limit=limit))
        return frames.sweeps_frame(response.sweeps)

    def sweep(self, sweep_id):
        """One sweep with its run counts, as a dict (Sweep)."""
        return to_dict(self._call(self._stub.GetSweep,
                                  pb.GetSweepRequest(sweep_id=int(sweep_id))))

    def cancel(self, sweep_id):
        """Cancels every queued or running run of the sweep; returns the Sweep dict."""
        return to_dict(self._call(self._stub.CancelSweep,
                                  pb.CancelSweepRequest(sweep_id=int(sweep_id))))

    def retry_failed(self, sweep_id):
        """Requeues the failed runs of a sweep; returns their ids as ints."""
        response = self._call(self._stub.RetryFailed,
                              pb.RetryFailedRequest(sweep_id=int(sweep_id)))
        return list(response.run_ids)

    def watch(self, sweep_id, *, reconnects=18):
        """Yields WatchSweepEvent dicts ({"runs": [...], "sweep": {...}, "snapshot": bool})
        until the sweep ends (its state is SWEEP_DONE, SWEEP_FAILED or SWEEP_CANCELLED):
        first a snapshot of every run, then the runs that changed, as `xmodctl sweep watch`.

        If the coordinator goes away after it served the watch, the watch reconnects (backoff
        0.25 s .. 4 s, at most `reconnects` times in a row, about a minute) and resumes with a
        new snapshot. Raises XmodError for other failures, and UNAVAILABLE when the stream
        ends before the sweep does.
        """
        request = pb.WatchSweepRequest(sweep_id=int(sweep_id))
        connected, retries = False, 0
        while True:
            stream = self._stub.WatchSweep(request, metadata=self._metadata)
            try:
                for event in stream:
                    connected, retries = True, 0
                    yield to_dict(event)
                    if event.sweep.state in _ENDED:
                        return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or not connected or \
                        retries >= reconnects:
                    raise XmodError.from_rpc(e, self.addr) from None
                time.sleep(0.25 * 2 ** min(retries, 4))
                retries += 1
                continue
            finally:
                stream.cancel()
            raise XmodError(grpc.StatusCode.UNAVAILABLE,
                            f"the watch stream of sweep {sweep_id} ended before the sweep did",
                            self.addr)

    def wait(self, sweep_id, *, reconnects=18):
        """Watches the sweep until it ends; returns its final Sweep dict."""
        sweep = None
        for event in self.watch(sweep_id, reconnects=reconnects):
            sweep = event.get("sweep", sweep)
        return self.sweep(sweep_id) if sweep is None else sweep

    # Runs.

    def runs(self, sweep_id=None, *, states=None, limit=0, group=None, **query):
        """Runs (of one sweep, in some states: names such as "failed" or RunState numbers) as
        a DataFrame, one row per run (xmod.frames: "id", "name", "state", "spec.model.k",
        "progress.val_loss", ...), every page of the listing read in turn. `query` takes
        run_pages' filters and order (arch, k, a, seq_len, backbone, label, name, sort,
        descending). With group="replicates", one row per configuration instead (a RunGroup:
        "name", "run_ids", "val_loss.mean", "val_loss.sd", "val_loss.n", "live_delta.mean",
        ..., "first.id", "first.spec.model.k", ...)."""
        replicates = group == "replicates"
        entries = []
        for page in self._run_pages(sweep_id, states=states, limit=limit, group=group,
                                    page_size=_RUNS_PAGE_SIZE, **query):
            entries.extend(page.groups if replicates else page.runs)
            if limit and len(entries) >= limit:
                entries = entries[:limit]
                break
        return frames.messages_frame(entries, run_pages_pb2.RunGroup if replicates else types_pb2.Run)

    def run_pages(self, sweep_id=None, *, page_size=100, page_token="", **query):
        """The listing's pages, one ListRunsResponse dict each (as `xmodctl runs list
        --page_size N -o json` and GET /api/sweeps/{id}/runs?page_size=N print them:
        "runs" or "groups", "next_page_token", "total_size"), until the last. Takes runs()'s
        filters, order and group; page_token starts after an earlier page. Pages are keyset
        pages: runs added or changed while paging are neither listed twice nor skipped
        (unless their sort key moves them behind the page read)."""
        for page in self._run_pages(sweep_id, page_size=page_size, page_token=page_token,
                                    **query):
            yield to_dict(page)

    def _run_pages(self, sweep_id, *, page_token="", **query):
        request = _list_runs_request(sweep_id, **query)
        request.page_token = page_token
        while True:
            page = self._call(self._stub.ListRuns, request)
            yield page
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    def run(self, run_id):
        """One run with its attempts and checkpoints, as a dict (GetRunResponse, as
        `xmodctl run show ID -o json`)."""
        return to_dict(self._call(self._stub.GetRun, pb.GetRunRequest(run_id=int(run_id))))

    def resume_run(self, run_id):
        """Requeues a failed or cancelled run from its latest checkpoint; returns the Run."""
        return to_dict(self._call(self._stub.ResumeRun, pb.ResumeRunRequest(run_id=int(run_id))))

    def cancel_run(self, run_id):
        """Cancels one run (stops it if running); returns the Run dict."""
        return to_dict(self._call(self._stub.CancelRun, pb.CancelRunRequest(run_id=int(run_id))))

    def metrics(self, run_ids, names=None, *, max_points=0):
        """Metric series of one or more runs as a long DataFrame with columns run_id, name,
        step, tokens, flops, value (canonical points, downsampled by the server to max_points
        per series; 0 = its default of 500). names: only these series, e.g.
        [xmod.series.VAL_LOSS]."""
        if isinstance(names, str):
            names = [names]
        rows = []
        for run_id in _ids(run_ids):
            request = pb.GetMetricsRequest(run_id=run_id, names=names or [],
                                           max_points=max_points)
            rows.append((run_id, self._call(self._stub.GetMetrics, request)))
        return frames.metrics_frame(rows)

    def evals(self, run_ids):
        """Zero-shot results of one or more runs (their spec's training.eval_tasks) as a
        DataFrame, one row per run and task: run_id, task, n, acc, acc_stderr, acc_norm,
        acc_norm_stderr, ppl, ppl_stderr — the standard errors as lm-evaluation-harness
        computes them; NaN where a run reported none (xmod.frames.evals_frame)."""
        rows = []
        for run_id in _ids(run_ids):
            run = self._call(self._stub.GetRun, pb.GetRunRequest(run_id=run_id)).run
            tasks = [t.task for t in run.spec.training.eval_tasks]
            names = [f"eval/{t}/{field}" for t in tasks for field in frames.EVAL_COLUMNS[2:]]
            metrics = (self._call(self._stub.GetMetrics, pb.GetMetricsRequest(
                run_id=run_id, names=names)) if names else pb.GetMetricsResponse())
            rows.append((run_id, tasks, metrics))
        return frames.evals_frame(rows)

    def query(self, sql, *, max_rows=0):
        """A read-only SQL query (SELECT/WITH) on the results database as a DataFrame with
        typed columns (xmod.frames.query_frame); frame.attrs["truncated"] is set when the
        server's row limit cut it."""
        response = self._call(self._stub.Query, pb.QueryRequest(sql=sql, max_rows=max_rows))
        return frames.query_frame(response)

    # Fits (paper Eq. 14) and plans.

    @staticmethod
    def _subject(sweep_id, study):
        if bool(sweep_id) == bool(study):
            raise invalid_argument("give a sweep id or study=NAME, not both or neither")
        return {"sweep_id": int(sweep_id or 0), "study": study or ""}

    def fit(self, sweep_id=None, *, study=None):
        """The latest fit of a sweep or a study, as a dict (Fit, as `xmodctl fit show -o
        json`). NOT_FOUND while there is none."""
        request = pb.GetFitRequest(**self._subject(sweep_id, study))
        return to_dict(self._call(self._stub.GetFit, request))

    def predict(self, sweep_id=None, *, study=None, points=None, flops=None, seq_len=None,
                backbone=None, k=None, a=1.0):
        """Predicted Delta and loss under the latest fit, as a DataFrame with one row per
        point ("point.flops", "point.seq_len", "point.backbone", "point.k", "point.a",
        "delta", "loss", "delta_low", "delta_high").

        points: LawPoint dicts ({"flops": 1e20, "seq_len": 32768, "backbone": "556M",
        "k": 8, "a": 4}); or, as `xmodctl fit predict`, every combination of flops, seq_len,
        k and a (each a number or a list) at one backbone.
        """
        subject = self._subject(sweep_id, study)
        if points is None:
            if flops is None or seq_len is None or backbone is None or k is None:
                raise invalid_argument("predict: give points, or flops, seq_len, backbone and k")
            as_list = lambda v: list(v) if isinstance(v, (list, tuple)) else [v]  # noqa: E731
            points = [{"flops": c, "seq_len": l, "backbone": backbone, "k": kk, "a": aa}
                      for c, l, kk, aa in itertools.product(as_list(flops), as_list(seq_len),
                                                            as_list(k), as_list(a))]
        request = pb.PredictRequest(points=[parse_message(p, pb.LawPoint, "points")
                                            for p in points], **subject)
        response = self._call(self._stub.Predict, request)
        return frames.messages_frame(response.predictions, pb.Prediction)

    def recommend(self, sweep_id=None, *, flops, seq_len, backbone, study=None, ks=None,
                  as_=None, max_total_params=0):
        """The best (K, A) for (C, L, backbone) under the latest fit, as a dict
        (RecommendResponse, as `xmodctl fit recommend -o json`): k, a, delta, total_params,
        closed_form_k (the paper's A.3 closed-form optimum at A = 1, a cross-check of k) and
        every candidate, best first. ks, as_: candidate K and A (server defaults 1..32 and
        0.5, 1, 2, 3, 4, 5); max_total_params: a cap on N (0 = none)."""
        request = pb.RecommendRequest(flops=flops, seq_len=seq_len, backbone=backbone,
                                      ks=ks or [], max_total_params=max_total_params,
                                      **self._subject(sweep_id, study))
        getattr(request, "as").extend(as_ or [])  # "as" is a Python keyword
        return to_dict(self._call(self._stub.Recommend, request))

    def propose(self, sweep_id, *, targets=None, count=0, compute_left=0, submit=False,
                bootstrap_samples=0, seed=0, study=""):
        """The next runs that tell most about the targets' (K*, A*) per training FLOP
        (docs/adaptive-design.md), as a dict (DesignDecision, as `xmodctl fit propose -o json`):
        ranked proposals with their reasons, the recommendation per target, and, with
        submit=True, the ids of the runs queued. targets: [(C, L, backbone), ...] or
        DesignTarget dicts (default: the sweep's adaptive targets). study: under the study's
        fit (every member's runs); sweep_id is then the member whose grids are the candidates."""
        def target(t):
            if isinstance(t, (tuple, list)):
                flops, seq_len, backbone = t
                return spec_pb2.DesignTarget(flops=flops, seq_len=seq_len, backbone=backbone)
            return parse_message(t, spec_pb2.DesignTarget, "targets")
        request = pb.ProposeRunsRequest(sweep_id=sweep_id,
                                        targets=[target(t) for t in (targets or [])],
                                        count=count, compute_left=compute_left, submit=submit,
                                        bootstrap_samples=bootstrap_samples, seed=seed,
                                        study=study)
        return to_dict(self._call(self._stub.ProposeRuns, request))

    def decisions(self, sweep_id, *, limit=0):
        """The sweep's stored design decisions, newest first, as a list of DesignDecision
        dicts (adaptive sweeps and ProposeRuns)."""
        response = self._call(self._stub.ListDecisions,
                              pb.ListDecisionsRequest(sweep_id=sweep_id, limit=limit))
        return [to_dict(d) for d in response.decisions]

    def select_pilot(self, sweep_id):
        """The paper's B.3 pilot pick by measured loss, as a dict (SelectPilotResponse, as
        `xmodctl pilot select -o json`): every X-MoD and MoE configuration of the pilot sweep
        (Fig. 4's points: label, k, a, moe, total_params, status, val_loss as the mean final
        validation loss of the succeeded seeds, runs, run_ids) and one selection per MoE
        (baseline, pick_index, within_budget, over_budget, provisional, reason; indices into
        configurations). NOT_FOUND for an unknown sweep; FAILED_PRECONDITION for a sweep with
        no MoE or no X-MoD runs, or no finished run yet."""
        request = pilot_pb2.SelectPilotRequest(sweep_id=int(sweep_id))
        return to_dict(self._call(self._stub.SelectPilot, request))

    def plan(self, model, seq_len):
        """Layer plan, parameters and FLOPs of a model (paper Table 6 accounting) as a dict
        (PlanResponse). model: a ModelSpec as a message, dict ({"arch": "XMOD", "backbone":
        {"name": "556M"}, "k": 8, "a": 4}) or text."""
        request = pb.PlanRequest(model=parse_message(model, spec_pb2.ModelSpec, "model"),
                                 seq_len=seq_len)
        return to_dict(self._call(self._stub.Plan, request))

    # Studies: one fit over several sweeps (docs/design.md, "Studies").

    def create_study(self, spec):
        """Stores a study (StudySpec as a message, dict, file or text); returns the Study."""
        request = pb.CreateStudyRequest(spec=parse_message(spec, pb.StudySpec, "study"))
        return to_dict(self._call(self._stub.CreateStudy, request))

    def study(self, name):
        """One study by name, as a dict (Study)."""
        return to_dict(self._call(self._stub.GetStudy, pb.GetStudyRequest(name=name)))

    def studies(self):
        """All studies, newest first, as a list of Study dicts."""
        response = self._call(self._stub.ListStudies, pb.ListStudiesRequest())
        return [to_dict(s) for s in response.studies]

    # A shared cluster.

    def usage(self, window_s=24 * 3600):
        """Per user credential: slots in use, quota (-1: none), weight, share and the
        GPU-hours and core-hours of the last `window_s` seconds, as a list of UserUsage
        dicts (docs/operations.md, "Sharing a cluster"); `xmodctl usage -o json` prints the
        same fields."""
        request = sharing_pb2.GetUsageRequest(window_ms=int(window_s * 1000))
        return [to_dict(u) for u in self._call(self._stub.GetUsage, request).users]

    def events(self, *, sweep_id=0, run_id=0, actor=None, limit=0, before_id=0):
        """The coordinator's event log, newest first, as a DataFrame (one row an Event:
        id, time_unix_ms, kind, sweep_id, run_id, text, actor — the credential that made the
        change, "" for the anonymous caller, None where the coordinator acted on its
        own): a sweep's events and its runs', one run's, or one actor's changes (actor=""
        for the anonymous caller). One page of `limit` events (0 = 100, at most 1000); pass
        the smallest id back as before_id for the page before it."""
        request = pb.ListEventsRequest(sweep_id=int(sweep_id), run_id=int(run_id),
                                       limit=int(limit), before_id=int(before_id))
        if actor is not None:
            request.actor = actor
        response = self._call(self._stub.ListEvents, request)
        return frames.messages_frame(response.events, types_pb2.Event)
