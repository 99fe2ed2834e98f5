"""xmod.Client against an in-process fake Coordinator: credentials, requests, error mapping,
and the watch's end and reconnect rules."""
from concurrent import futures

import grpc
import pandas as pd
import pytest

import xmod
from xmod.v1 import coordinator_pb2 as pb
from xmod.v1 import coordinator_pb2_grpc, pilot_pb2, sharing_pb2, types_pb2


class FakeCoordinator(coordinator_pb2_grpc.CoordinatorServicer):
    def __init__(self):
        self.metadata = []        # the authorization header of each call ("" = none)
        self.requests = []
        self.watch_script = []    # per WatchSweep call: a list of events, or a status code

    def _seen(self, request, context):
        header = dict(context.invocation_metadata()).get("authorization", "")
        self.metadata.append(header)
        self.requests.append(request)

    def SubmitSweep(self, request, context):
        self._seen(request, context)
        if request.spec.grids and list(request.spec.grids[0].ks) == [0]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "grids[0].ks[0]: K must be >= 1")
        if request.spec.name == "unwritable":  # as the coordinator answers when its volume fails
            context.set_trailing_metadata(((xmod.errors.STATUS_ORIGIN_KEY,
                                            xmod.errors.STATUS_ORIGIN_COORDINATOR),))
            context.abort(grpc.StatusCode.UNAVAILABLE, "the database /db cannot be written")
        return pb.SubmitSweepResponse(sweep_id=0 if request.dry_run else 7)

    def ListSweeps(self, request, context):
        self._seen(request, context)
        return pb.ListSweepsResponse()

    def Predict(self, request, context):
        self._seen(request, context)
        return pb.PredictResponse(predictions=[pb.Prediction(point=p, delta=0.1)
                                               for p in request.points])

    def SelectPilot(self, request, context):
        self._seen(request, context)
        if request.sweep_id != 7:
            context.abort(grpc.StatusCode.NOT_FOUND, f"sweep {request.sweep_id} not found")
        return pilot_pb2.SelectPilotResponse(sweep_id=7, selections=[
            pilot_pb2.PilotSelection(moe_index=0, pick_index=-1, reason="no X-MoD")])

    # Run 5 evaluated gcide and lambada at its end (the trainer's eval/<task>/<field>
    # metrics); run 6 lists no eval task.
    EVAL = {"eval/gcide/acc": 0.4375, "eval/gcide/acc_stderr": 0.0222,
            "eval/gcide/acc_norm": 0.4375, "eval/gcide/acc_norm_stderr": 0.0222,
            "eval/gcide/n": 500, "eval/lambada/acc": 0.125, "eval/lambada/acc_stderr": 0.0331,
            "eval/lambada/ppl": 812.5, "eval/lambada/ppl_stderr": 97.25, "eval/lambada/n": 96}

    def GetRun(self, request, context):
        self._seen(request, context)
        run = types_pb2.Run(id=request.run_id)
        if request.run_id == 5:
            for task in ("gcide", "lambada"):
                run.spec.training.eval_tasks.add(task=task, data=f"/data/{task}.jsonl")
        return pb.GetRunResponse(run=run)

    def GetMetrics(self, request, context):
        self._seen(request, context)
        response = pb.GetMetricsResponse()
        for name in request.names:
            if name in self.EVAL:
                response.series.add(name=name).points.add(value=self.EVAL[name])
        return response

    def GetUsage(self, request, context):
        self._seen(request, context)
        return sharing_pb2.GetUsageResponse(window_ms=request.window_ms, users=[
            sharing_pb2.UserUsage(user="alice", cpu_slots_in_use=2, cpu_quota=2, gpu_quota=-1,
                                  weight=1, share=0.5, core_hours=1.5)])

    def WatchSweep(self, request, context):
        self._seen(request, context)
        script = self.watch_script.pop(0)
        for item in script:
            if isinstance(item, grpc.StatusCode):
                context.abort(item, "coordinator restarting")
            yield item


def event(state, snapshot=False):
    return pb.WatchSweepEvent(snapshot=snapshot, sweep=types_pb2.Sweep(id=7, state=state))


@pytest.fixture
def fake(monkeypatch):
    for name in ("XMOD_ADDR", "XMOD_TOKEN", "XMOD_TOKEN_FILE", "XMOD_TLS_CA", "XMOD_TLS_CERT",
                 "XMOD_TLS_KEY"):
        monkeypatch.delenv(name, raising=False)
    servicer = FakeCoordinator()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.addr = f"127.0.0.1:{port}"
    yield servicer
    server.stop(None)


def test_token_sources_in_xmodctl_order(fake, tmp_path, monkeypatch):
    xmod.Client(fake.addr).sweeps()
    assert fake.metadata[-1] == ""  # no credentials: no header
    monkeypatch.setenv("XMOD_TOKEN", "env-token-0123456789")
    xmod.Client(fake.addr).sweeps()
    assert fake.metadata[-1] == "Bearer env-token-0123456789"
    path = tmp_path / "token"
    path.write_text("file-token-0123456789\n")
    monkeypatch.setenv("XMOD_TOKEN_FILE", str(path))
    xmod.Client(fake.addr).sweeps()
    assert fake.metadata[-1] == "Bearer file-token-0123456789"
    xmod.Client(fake.addr, "arg-token-0123456789").sweeps()
    assert fake.metadata[-1] == "Bearer arg-token-0123456789"
    path.write_text("\n")
    with pytest.raises(xmod.XmodError, match="is empty"):
        xmod.Client(fake.addr)
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client(fake.addr, token_file=str(tmp_path / "missing"))
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_address_from_environment(fake, monkeypatch):
    assert xmod.Client().addr == "127.0.0.1:7070"
    monkeypatch.setenv("XMOD_ADDR", fake.addr)
    assert xmod.Client().submit({"name": "s"}, dry_run=True)["sweep_id"] == "0"


def test_submit_sends_the_spec_with_absolute_globs(fake):
    with xmod.Client(fake.addr) as client:
        response = client.submit('name: "s" data { train_glob: "c/*.bin" }', base_dir="/d")
    assert response == {"sweep_id": "7", "runs": []}
    request = fake.requests[-1]
    assert request.spec.name == "s" and request.spec.data.train_glob == "/d/c/*.bin"
    assert not request.dry_run


def test_server_errors_keep_code_and_message(fake):
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client(fake.addr).submit({"grids": [{"ks": [0]}]})
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert e.value.message == "grids[0].ks[0]: K must be >= 1"
    assert str(e.value) == "INVALID_ARGUMENT: grids[0].ks[0]: K must be >= 1"
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client(fake.addr).fit()
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT  # neither sweep nor study


def test_predict_expands_the_grid(fake):
    frame = xmod.Client(fake.addr).predict(3, flops=[1e19, 1e20], seq_len=4096,
                                           backbone="556M", k=[2, 4, 8], a=[1, 2])
    assert len(frame) == 12 and fake.requests[-1].sweep_id == 3
    assert sorted(set(frame["point.k"])) == [2, 4, 8] and set(frame["point.a"]) == {1.0, 2.0}


def test_usage_asks_for_the_window_and_returns_one_dict_per_user(fake):
    users = xmod.Client(fake.addr).usage(window_s=3600)
    assert fake.requests[-1].window_ms == 3_600_000
    assert [u["user"] for u in users] == ["alice"]
    assert users[0]["cpu_slots_in_use"] == 2 and users[0]["gpu_quota"] == -1
    assert users[0]["core_hours"] == 1.5


def test_watch_ends_with_the_sweep(fake):
    fake.watch_script = [[event(types_pb2.SWEEP_ACTIVE, snapshot=True),
                          event(types_pb2.SWEEP_DONE), event(types_pb2.SWEEP_ACTIVE)]]
    events = list(xmod.Client(fake.addr).watch(7))
    assert [e["sweep"]["state"] for e in events] == ["SWEEP_ACTIVE", "SWEEP_DONE"]
    fake.watch_script = [[event(types_pb2.SWEEP_ACTIVE, snapshot=True)]]
    with pytest.raises(xmod.XmodError, match="ended before the sweep did"):
        list(xmod.Client(fake.addr).watch(7))


def test_watch_reconnects_after_the_coordinator_went_away(fake):
    fake.watch_script = [
        [event(types_pb2.SWEEP_ACTIVE, snapshot=True), grpc.StatusCode.UNAVAILABLE],
        [event(types_pb2.SWEEP_ACTIVE, snapshot=True), event(types_pb2.SWEEP_FAILED)],
    ]
    client = xmod.Client(fake.addr)
    events = list(client.watch(7))
    assert [e["snapshot"] for e in events] == [True, True, False]
    fake.watch_script = [[event(types_pb2.SWEEP_ACTIVE, snapshot=True),
                          event(types_pb2.SWEEP_DONE)]]
    assert client.wait(7)["state"] == "SWEEP_DONE"
    fake.watch_script = [[grpc.StatusCode.PERMISSION_DENIED]]
    with pytest.raises(xmod.XmodError) as e:
        list(client.watch(7))
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_unreachable_coordinator_is_unavailable():
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client("127.0.0.1:1", timeout=5).sweeps()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert not e.value.answered
    assert "cannot reach the coordinator at 127.0.0.1:1" in str(e.value)


def test_unavailable_answered_by_the_coordinator_keeps_its_message(fake):
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client(fake.addr).submit({"name": "unwritable"})
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert e.value.answered
    assert str(e.value) == "UNAVAILABLE: the database /db cannot be written"


def test_select_pilot_sends_the_sweep_and_returns_the_document(fake):
    client = xmod.Client(fake.addr)
    pilot = client.select_pilot(7)
    assert fake.requests[-1].sweep_id == 7
    assert pilot["sweep_id"] == "7"
    assert pilot["selections"][0]["pick_index"] == -1
    assert pilot["selections"][0]["within_budget"] == []  # defaults printed, as xmodctl does
    with pytest.raises(xmod.XmodError) as e:
        client.select_pilot(8)
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "sweep 8 not found" in e.value.message


def test_evals_has_each_metric_with_its_standard_error(fake):
    frame = xmod.Client(fake.addr).evals([5, 6])
    assert list(frame.columns) == ["run_id", "task", "n", "acc", "acc_stderr", "acc_norm",
                                   "acc_norm_stderr", "ppl", "ppl_stderr"]
    assert frame["task"].tolist() == ["gcide", "lambada"] and set(frame["run_id"]) == {5}
    gcide, lambada = frame.iloc[0], frame.iloc[1]
    assert gcide["acc"] == 0.4375 and gcide["acc_stderr"] == 0.0222 and gcide["n"] == 500
    assert pd.isna(gcide["ppl"]) and pd.isna(gcide["ppl_stderr"])
    assert lambada["ppl"] == 812.5 and lambada["ppl_stderr"] == 97.25
    assert pd.isna(lambada["acc_norm"]) and pd.isna(lambada["acc_norm_stderr"])
    asked = [r for r in fake.requests if isinstance(r, pb.GetMetricsRequest)]
    assert len(asked) == 1 and "eval/lambada/ppl_stderr" in asked[0].names  # none for run 6
