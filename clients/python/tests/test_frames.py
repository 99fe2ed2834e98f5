"""DataFrames of runs, sweeps, predictions, metrics and queries (xmod.frames)."""
import pandas as pd

from xmod import frames
from xmod.v1 import coordinator_pb2 as pb
from xmod.v1 import spec_pb2, types_pb2


def run(run_id, k=None, state=types_pb2.SUCCEEDED):
    r = types_pb2.Run(id=run_id, sweep_id=1, name=f"run-{run_id}", state=state)
    r.spec.model.arch = spec_pb2.XMOD if k else spec_pb2.DENSE
    if k:
        r.spec.model.k = k
        r.spec.model.n0 = 2
    r.progress.val_loss = 3.5
    return r


def test_runs_frame_has_one_row_per_run_and_stable_columns():
    frame = frames.messages_frame([run(1), run(2, k=4, state=types_pb2.FAILED)], types_pb2.Run)
    assert len(frame) == 2
    empty = frames.messages_frame([], types_pb2.Run)
    assert list(empty.columns) == list(frame.columns) and len(empty) == 0
    for column in ["id", "sweep_id", "name", "state", "progress.val_loss", "spec.model.arch",
                   "spec.model.k", "spec.model.n0", "spec.training.flop_budget",
                   "spec.data.train_glob"]:
        assert column in frame.columns, column
    assert frame["id"].tolist() == [1, 2]  # ints here, not the JSON mapping's strings
    assert frame["state"].tolist() == ["SUCCEEDED", "FAILED"]
    assert frame["spec.model.arch"].tolist() == ["DENSE", "XMOD"]
    assert frame["spec.model.n0"].isna().tolist() == [True, False]  # optional: None if unset
    assert frame["progress.val_loss"].tolist() == [3.5, 3.5]
    assert isinstance(frame.loc[0, "spec.training.eval_tasks"], list)


def test_sweeps_frame_counts_runs_by_state():
    sweep = types_pb2.Sweep(id=1, name="s", state=types_pb2.SWEEP_ACTIVE)
    sweep.run_counts["SUCCEEDED"] = 3
    sweep.run_counts["QUEUED"] = 1
    frame = frames.sweeps_frame([sweep])
    assert frame.loc[0, "succeeded"] == 3 and frame.loc[0, "queued"] == 1
    assert frame.loc[0, "failed"] == 0 and frame.loc[0, "state"] == "SWEEP_ACTIVE"
    assert frame.loc[0, "run_counts"] == {"SUCCEEDED": 3, "QUEUED": 1}
    assert len(frames.sweeps_frame([])) == 0


def test_predictions_frame():
    p = pb.Prediction(delta=-0.01, loss=3.2)
    p.point.flops, p.point.k, p.point.backbone = 1e20, 8, "556M"
    frame = frames.messages_frame([p], pb.Prediction)
    assert frame.loc[0, "point.k"] == 8 and frame.loc[0, "point.flops"] == 1e20
    assert frame.loc[0, "delta"] == -0.01


def test_metrics_frame_is_long():
    response = pb.GetMetricsResponse()
    for name in ["train/loss", "val/loss"]:
        series = response.series.add(name=name)
        for step in range(1, 4):
            series.points.add(step=step, tokens=step * 64, flops=step * 1e6, name=name,
                              value=5.0 / step)
    frame = frames.metrics_frame([(7, response), (8, pb.GetMetricsResponse())])
    assert list(frame.columns) == frames.METRIC_COLUMNS
    assert len(frame) == 6 and set(frame["run_id"]) == {7}
    assert frame.dtypes["step"] == "int64" and frame.dtypes["flops"] == "float64"
    wide = frame.pivot_table(index="step", columns="name", values="value")
    assert wide.shape == (3, 2)
    empty = frames.metrics_frame([])
    assert list(empty.columns) == frames.METRIC_COLUMNS and len(empty) == 0


def test_evals_frame_has_one_row_per_run_and_task():
    response = pb.GetMetricsResponse()
    for name, values in [("eval/boolq/acc", [0.5, 0.625]), ("eval/boolq/acc_stderr", [0.0484]),
                         ("eval/boolq/n", [100])]:
        series = response.series.add(name=name)
        for value in values:
            series.points.add(value=value)
    frame = frames.evals_frame([(3, ["boolq", "lambada"], response)])
    assert list(frame.columns) == frames.EVAL_COLUMNS
    assert frame["task"].tolist() == ["boolq", "lambada"]
    assert frame.loc[0, "acc"] == 0.625  # the latest point
    assert frame.loc[0, "acc_stderr"] == 0.0484 and frame.loc[0, "n"] == 100
    assert frame.loc[1, ["acc", "acc_stderr", "n"]].isna().all()  # not evaluated yet
    empty = frames.evals_frame([])
    assert list(empty.columns) == frames.EVAL_COLUMNS and len(empty) == 0


def test_query_frame_types_columns():
    response = pb.QueryResponse(columns=["id", "loss", "name", "maybe", "nothing"],
                                truncated=True)
    response.rows.add(values=["1", "2.5", "a", "3", ""], is_null=[False] * 4 + [True])
    response.rows.add(values=["2", "3", "b", "", ""], is_null=[False] * 3 + [True, True])
    frame = frames.query_frame(response)
    assert list(frame.columns) == ["id", "loss", "name", "maybe", "nothing"]
    assert frame.dtypes["id"] == "int64" and frame["id"].tolist() == [1, 2]
    assert frame.dtypes["loss"] == "float64" and frame["loss"].tolist() == [2.5, 3.0]
    assert frame["name"].tolist() == ["a", "b"]
    assert str(frame.dtypes["maybe"]) == "Int64" and pd.isna(frame.loc[1, "maybe"])
    assert frame["nothing"].isna().all()
    assert frame.attrs["truncated"] is True
    empty = frames.query_frame(pb.QueryResponse(columns=["a", "a"]))
    assert list(empty.columns) == ["a", "a"] and len(empty) == 0
    assert frames.query_frame(pb.QueryResponse()).empty
