"""The client against a real xmod-coordinator and two xmod-workers on loopback.

scripts/test-python-client.sh starts them (tests/lib/cluster.sh: credentials, free ports)
with tests/fake_trainer.py as the workers' trainer, and sets XMOD_ADDR, XMOD_TOKEN_FILE (user
"tester"'s token), OTHER_TOKEN_FILE (user "other"'s), ADMIN_TOKEN_FILE (admin "operator"'s),
READ_TOKEN_FILE (a "read" token), XMOD_BIN_DIR (for xmodctl), XMOD_HTTP_ADDR
(the coordinator's HTTP /api/) and XMOD_PYCLIENT_CLUSTER=1; without them these tests are
skipped. One 10-run sweep (Dense and
X-MoD K = 2..16 at L = 64 and 128, the fewest runs the law fit accepts) is submitted,
watched to its end and fitted once per module; the tests then read it back through the
client and compare its dicts with `xmodctl ... -o json` and the HTTP /api/ for the same
objects: one API shape everywhere (proto field names, defaults printed).
"""
import json
import os
import subprocess
import time
import urllib.request

import grpc
import pytest

import xmod

pytestmark = pytest.mark.skipif(os.environ.get("XMOD_PYCLIENT_CLUSTER") != "1",
                                reason="needs the cluster of scripts/test-python-client.sh")


def sweep_spec(corpus, name="pyclient"):
    return {
        "name": name,
        "description": "Python client test",
        "grids": [
            {"label": "dense", "archs": ["DENSE"], "backbones": ["tiny-test"],
             "seq_lens": [64, 128]},
            {"label": "xmod", "archs": ["XMOD"], "backbones": ["tiny-test"],
             "seq_lens": [64, 128], "ks": [2, 4, 8, 16], "as": [1]},
        ],
        "training": {"flop_budget": 3e9, "seq_len": 64, "batch_tokens": 128,
                     "eval_marks": 4},
        "data": {"train_glob": f"{corpus}/*_train_*.bin", "val_glob": f"{corpus}/*_val_*.bin"},
        "fit": {"enabled": True, "seed": 1},
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    # The coordinator only checks that the globs match; the fake trainer reads no data.
    path = tmp_path_factory.mktemp("corpus")
    (path / "c_train_000.bin").write_bytes(b"")
    (path / "c_val_000.bin").write_bytes(b"")
    return path


@pytest.fixture(scope="module")
def client():
    with xmod.Client() as c:  # XMOD_ADDR, XMOD_TOKEN_FILE
        yield c


@pytest.fixture(scope="module")
def watched(client, corpus):
    """Submits the sweep and watches it to its end: (submit response, watch events)."""
    submitted = client.submit(sweep_spec(corpus))
    events = list(client.watch(submitted["sweep_id"]))
    return submitted, events


@pytest.fixture(scope="module")
def sweep_id(watched):
    return int(watched[0]["sweep_id"])


@pytest.fixture(scope="module")
def fit(client, sweep_id):
    """The sweep's fit, once the coordinator has stored it (it fits after the last run)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return client.fit(sweep_id)
        except xmod.XmodError as e:
            if e.code != grpc.StatusCode.FAILED_PRECONDITION or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def xmodctl(*args, token_file=None):
    """`xmodctl ARGS -o json` against the test coordinator, parsed."""
    env = dict(os.environ)
    if token_file:
        env["XMOD_TOKEN_FILE"] = token_file
    out = subprocess.run([os.path.join(os.environ["XMOD_BIN_DIR"], "xmodctl"), *args,
                          "-o", "json"], env=env, check=True, capture_output=True, text=True,
                         timeout=120)
    return json.loads(out.stdout)


def http_api(path):
    """GET PATH on the coordinator's HTTP API with the read token, parsed."""
    with open(os.environ["READ_TOKEN_FILE"]) as f:
        token = f.read().strip()
    request = urllib.request.Request(f"http://{os.environ['XMOD_HTTP_ADDR']}{path}",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_submit_and_watch(watched):
    submitted, events = watched
    assert int(submitted["sweep_id"]) > 0 and len(submitted["runs"]) == 10
    assert events[0]["snapshot"] is True and len(events[0]["runs"]) == 10
    assert all(not e["snapshot"] for e in events[1:])
    assert events[-1]["sweep"]["state"] == "SWEEP_DONE"
    assert events[-1]["sweep"]["run_counts"] == {"SUCCEEDED": 10}
    finished = {r["id"] for e in events for r in e["runs"] if r["state"] == "SUCCEEDED"}
    assert finished == {r["id"] for r in submitted["runs"]}


def test_runs_frame(client, sweep_id):
    runs = client.runs(sweep_id)
    assert len(runs) == 10 and set(runs["state"]) == {"SUCCEEDED"}
    assert sorted(runs["spec.model.k"][runs["spec.model.arch"] == "XMOD"]) == [2, 2, 4, 4, 8,
                                                                               8, 16, 16]
    assert runs["id"].dtype == "int64" and (runs["sweep_id"] == sweep_id).all()
    assert (runs["progress.val_loss"] > 2).all()
    # The coordinator's progress: 100% once succeeded, over the whole steps the budget buys.
    assert (runs["progress.fraction"] == 1.0).all() and (runs["progress.planned_steps"] > 0).all()
    assert len(client.runs(sweep_id, states=["failed", "queued"])) == 0
    assert len(client.runs(sweep_id, limit=3)) == 3
    sweeps = client.sweeps()
    row = sweeps[sweeps["id"] == sweep_id].iloc[0]
    assert row["state"] == "SWEEP_DONE" and row["succeeded"] == 10 and row["queued"] == 0


def test_metrics_frame(client, sweep_id):
    ids = client.runs(sweep_id)["id"]
    metrics = client.metrics(ids)  # a Series of ids, as a notebook passes them
    assert list(metrics.columns) == ["run_id", "name", "step", "tokens", "flops", "value"]
    assert set(metrics["run_id"]) == set(ids)
    assert set(metrics["name"]) >= {"train/loss", "val/loss"}
    val = client.metrics(ids.iloc[0], names="val/loss")
    assert set(val["name"]) == {"val/loss"} and val["step"].tolist() == [1, 2, 3, 4]
    assert val["flops"].is_monotonic_increasing and val["value"].is_monotonic_decreasing


def test_query_frame(client, sweep_id):
    frame = client.query(f"SELECT run_id, name, k, final_val_loss, state FROM run_summary "
                         f"WHERE sweep_id = {sweep_id} ORDER BY run_id")
    assert list(frame.columns) == ["run_id", "name", "k", "final_val_loss", "state"]
    assert len(frame) == 10 and frame["run_id"].dtype == "int64"
    assert frame["final_val_loss"].dtype == "float64" and (frame["final_val_loss"] > 2).all()
    assert frame.attrs["truncated"] is False
    cut = client.query("SELECT run_id FROM run_summary", max_rows=2)
    assert len(cut) == 2 and cut.attrs["truncated"] is True
    with pytest.raises(xmod.XmodError) as e:
        client.query("DELETE FROM runs")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_fit_predict_recommend(client, sweep_id, fit):
    assert fit["error"] == "" and fit["n_obs"] == 8 and fit["r2"] > 0.9
    assert set(fit["params"]) >= {"e", "u", "eta_n", "rho_n", "w", "eta_l", "rho_l"}
    predictions = client.predict(sweep_id, flops=[1e10, 1e11], seq_len=128,
                                 backbone="tiny-test", k=[2, 8])
    assert len(predictions) == 4
    assert sorted(set(predictions["point.k"])) == [2, 8]
    assert (predictions["delta"] > 0).all()
    recommendation = client.recommend(sweep_id, flops=1e11, seq_len=128, backbone="tiny-test",
                                      ks=[2, 4, 8], as_=[1])
    assert recommendation["k"] == 2 and len(recommendation["candidates"]) == 3
    with pytest.raises(xmod.XmodError, match="not both"):
        client.fit(sweep_id, study="b4")


def test_propose_and_decisions(client, sweep_id, fit):
    decision = client.propose(sweep_id, targets=[(1e11, 128, "tiny-test")], count=2)
    assert decision["source"] == "propose" and len(decision["proposals"]) == 2
    assert all(p["reason"] and p["run_id"] == "0" for p in decision["proposals"])
    assert decision["recommendations"][0]["target"]["seq_len"] == 128
    # Without submit a proposal is a read: answered, never stored (id 0).
    assert decision["id"] == "0"
    assert client.decisions(sweep_id) == []
    assert http_api(f"/api/sweeps/{sweep_id}/decisions")["decisions"] == []
    with pytest.raises(xmod.XmodError, match="targets\\[0\\].backbone"):
        client.propose(sweep_id, targets=[(1e11, 128, "no-such-preset")])


def test_dicts_equal_xmodctl_json_and_http(client, watched, sweep_id, fit):
    # The same document, defaults included, from the client, xmodctl and HTTP.
    run_id = watched[0]["runs"][2]["id"]
    assert client.run(run_id) == xmodctl("run", "show", run_id)
    assert client.sweep(sweep_id) == xmodctl("sweep", "show", str(sweep_id))
    assert fit == xmodctl("fit", "show", str(sweep_id))
    assert fit == http_api(f"/api/sweeps/{sweep_id}/fit")
    recommendation = client.recommend(sweep_id, flops=1e11, seq_len=128, backbone="tiny-test",
                                      ks=[2, 4, 8], as_=[1])
    assert recommendation == xmodctl("fit", "recommend", str(sweep_id), "--C", "1e11", "--L",
                                     "128", "--backbone", "tiny-test", "--ks", "2,4,8", "--as",
                                     "1")
    assert recommendation == http_api(f"/api/sweeps/{sweep_id}/recommend?flops=1e11"
                                      "&seq_len=128&backbone=tiny-test&ks=2,4,8&as=1")
    assert xmodctl("sweep", "list") == http_api("/api/sweeps")
    assert xmodctl("runs", "list", "--sweep", str(sweep_id)) == \
        http_api(f"/api/sweeps/{sweep_id}/runs")


def test_pages_equal_xmodctl_and_http_pages(client, sweep_id):
    # One query three ways: the same pages, page tokens included, until the last.
    query = "sort=name&order=desc&arch=xmod&page_size=2"
    pages = list(client.run_pages(sweep_id, page_size=2, sort="name", descending=True,
                                  arch="xmod"))
    assert len(pages) > 1 and pages[-1]["next_page_token"] == ""
    token = ""
    for page in pages:
        args = ["runs", "list", "--sweep", str(sweep_id), "--page_size", "2", "--sort", "name",
                "--desc", "--arch", "xmod"] + (["--page_token", token] if token else [])
        assert page == xmodctl(*args)
        assert page == http_api(f"/api/sweeps/{sweep_id}/runs?{query}&page_token={token}")
        token = page["next_page_token"]
    names = [r["name"] for page in pages for r in page["runs"]]
    assert names == sorted(names, reverse=True)
    assert names == client.runs(sweep_id, arch="xmod", sort="name", descending=True)[
        "name"].tolist()
    groups = client.runs(sweep_id, group="replicates")  # no seeds: one run a configuration
    assert len(groups) == len(client.runs(sweep_id))
    assert groups["run_ids"].map(len).tolist() == [1] * len(groups)
    with pytest.raises(xmod.XmodError, match="page_token: malformed"):
        next(client.run_pages(sweep_id, page_token="garbage!"))


def test_submit_file_text_and_dry_run(client, corpus, tmp_path):
    spec = sweep_spec(corpus, name="pyclient-dry")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    ours = client.submit(path, dry_run=True)
    assert ours["sweep_id"] == "0" and len(ours["runs"]) == 10
    assert ours == xmodctl("sweep", "submit", "--dry_run", str(path))
    text = xmod.messages.to_dict(xmod.parse_message(spec, xmod.v1.spec_pb2.SweepSpec))
    assert client.submit(json.dumps(text), dry_run=True) == ours
    # A read credential may dry-run, but not submit.
    reader = xmod.Client(token_file=os.environ["READ_TOKEN_FILE"])
    assert reader.submit(path, dry_run=True)["sweep_id"] == "0"
    with pytest.raises(xmod.XmodError) as e:
        reader.submit(path)
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_errors_carry_code_and_field_path(client, corpus):
    bad = sweep_spec(corpus, name="bad")
    bad["grids"][1]["ks"] = [2, 0]
    with pytest.raises(xmod.XmodError) as e:
        client.submit(bad)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("grids[1].ks[1]: ")
    with pytest.raises(xmod.XmodError) as e:
        client.run(10**9)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(xmod.XmodError) as e:
        xmod.Client(token="not-a-known-token-0123").sweeps()
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED and "refused the token" in str(e.value)
    with xmod.Client("127.0.0.1:1", timeout=5) as nowhere:
        with pytest.raises(xmod.XmodError) as e:
            nowhere.sweeps()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE


def test_cancel_retry_resume(client, corpus, sweep_id):
    run_id = int(client.runs(sweep_id)["id"].iloc[0])
    assert client.retry_failed(sweep_id) == []  # none failed
    with pytest.raises(xmod.XmodError) as e:
        client.resume_run(run_id)  # a succeeded run is not resumed
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    # A second sweep, cancelled at once: its queued runs end CANCELLED, and so does a watch.
    other = client.submit(sweep_spec(corpus, name="pyclient-cancel"))["sweep_id"]
    assert client.cancel(other)["state"] == "SWEEP_CANCELLED"
    assert list(client.watch(other))[-1]["sweep"]["state"] == "SWEEP_CANCELLED"
    runs = client.runs(other)
    cancelled = runs[runs["state"] == "CANCELLED"]["id"].tolist()
    assert cancelled, runs[["id", "state"]]
    assert client.runs(other, states="cancelled")["id"].tolist() == cancelled
    with pytest.raises(xmod.XmodError, match="unknown run state"):
        client.runs(other, states=["done"])
    # Resuming one requeues it (once a stopped attempt has ended); it then runs to the end.
    # A free worker may take it (or even finish it) before the reply reads it back.
    deadline = time.monotonic() + 60
    while True:
        try:
            assert client.resume_run(cancelled[0])["state"] in {"QUEUED", "RUNNING", "SUCCEEDED"}
            break
        except xmod.XmodError as e:
            assert "still stopping" in e.message and time.monotonic() < deadline, e
            time.sleep(0.2)
    while client.run(cancelled[0])["run"]["state"] != "SUCCEEDED":
        assert time.monotonic() < deadline, client.run(cancelled[0])
        time.sleep(0.2)


def test_tenants_change_only_their_own_work(client, corpus):
    """Another user's changes to tester's sweep are PERMISSION_DENIED naming tester, and
    change nothing; the admin's go through; the event log says who did what."""
    sweep = client.submit(sweep_spec(corpus, name="pyclient-tenants"))["sweep_id"]
    run_id = int(client.runs(sweep)["id"].iloc[-1])
    with xmod.Client(token_file=os.environ["OTHER_TOKEN_FILE"]) as other:
        for call in (lambda: other.cancel(sweep), lambda: other.cancel_run(run_id),
                     lambda: other.retry_failed(sweep), lambda: other.resume_run(run_id),
                     lambda: other.create_study({"name": "theirs", "members": [
                         {"sweep_id": sweep, "role": "kxl"}]})):
            with pytest.raises(xmod.XmodError) as e:
                call()
            assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
            assert 'belongs to user "tester"' in e.value.message
            assert 'credential "other"' in e.value.message
        assert other.events(sweep_id=sweep, actor="other").empty
    with xmod.Client(token_file=os.environ["ADMIN_TOKEN_FILE"]) as admin:
        admin.cancel(sweep)  # the runs the workers finished meanwhile stay as they are
    events = client.events(sweep_id=sweep)
    assert list(events["kind"])[-1] == "sweep_submitted"  # newest first
    assert list(events["actor"])[-1] == "tester"
    cancelled = events[events["kind"] == "sweep_cancelled"]
    assert list(cancelled["actor"]) == ["operator"]
    assert not events["actor"].isna().all()


def test_plan(client):
    plan = client.plan({"arch": "XMOD", "backbone": {"name": "556M"}, "k": 8, "a": 4}, 32768)
    assert plan["layer_plan"] == "[D]x4 + ([S8]x24+[D]) + ([S8]x32+[D])x4"
    assert plan["layers"] == 161 and plan["active_params"] > 0
    dense = client.plan('arch: DENSE backbone { name: "556M" }', 4096)
    assert dense["total_params"] < plan["total_params"]


def test_select_pilot(client, corpus, sweep_id):
    # A small pilot (MoE 2:4 and X-MoD A1K2, A2K2 on tiny-test), run to its end: the client's
    # dict is xmodctl's and HTTP's document; a sweep with no MoE runs is refused.
    spec = sweep_spec(corpus, name="pyclient-pilot")
    spec.pop("fit")
    spec["grids"] = [
        {"label": "pilot-moe", "archs": ["MOE"], "backbones": ["tiny-test"],
         "moe_experts": ["2:4+0"]},
        {"label": "pilot-xmod", "archs": ["XMOD"], "backbones": ["tiny-test"], "ks": [2],
         "as": [1, 2]},
    ]
    pilot_id = client.submit(spec)["sweep_id"]
    assert list(client.watch(pilot_id))[-1]["sweep"]["state"] == "SWEEP_DONE"
    pilot = client.select_pilot(pilot_id)
    assert [c["label"] for c in pilot["configurations"] if c["arch"] == "MOE"] == ["MoE 2:4"]
    assert all(c["status"] == "PILOT_MEASURED" for c in pilot["configurations"])
    (selection,) = pilot["selections"]
    assert selection["baseline"]
    assert len(selection["within_budget"]) + len(selection["over_budget"]) == 2
    assert pilot == xmodctl("pilot", "select", str(pilot_id))
    assert pilot == http_api(f"/api/sweeps/{pilot_id}/pilot")
    with pytest.raises(xmod.XmodError) as e:
        client.select_pilot(sweep_id)  # Dense and X-MoD only
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and "not a pilot" in e.value.message
    with pytest.raises(xmod.XmodError) as e:
        client.select_pilot(10**9)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
