"""pandas DataFrames of runs, sweeps, predictions, metric series and query results.

Rows of messages (runs, sweeps, predictions) are flattened by the message's descriptor, so
every row of a type has the same columns whatever was set: a column per scalar field, named
by its path of .proto field names joined with "." ("id", "state", "progress.val_loss",
"spec.model.k"); enums as names; 64-bit integers as Python ints (not the JSON mapping's
strings); repeated fields and maps as lists and dicts in one cell; an unset proto3 `optional`
field as None. Pure functions.
"""
import pandas as pd
from google.protobuf.descriptor import FieldDescriptor

METRIC_COLUMNS = ["run_id", "name", "step", "tokens", "flops", "value"]
_METRIC_DTYPES = {"run_id": "int64", "step": "int64", "tokens": "int64", "flops": "float64",
                  "value": "float64"}


def _eval_fields():
    """The zero-shot result's fields (xmod.v1.EvalTaskResult, whose names the trainer's
    eval/<task>/<field> metrics carry), each metric followed by its standard error."""
    from xmod.v1 import eval_pb2

    names = [f.name for f in eval_pb2.EvalTaskResult.DESCRIPTOR.fields if f.name != "task"]
    ordered = []
    for name in names:
        if not name.endswith("_stderr"):
            ordered += [name] + ([f"{name}_stderr"] if f"{name}_stderr" in names else [])
    return ordered


EVAL_COLUMNS = ["run_id", "task"] + _eval_fields()


def _value(field, value):
    if field.type == FieldDescriptor.TYPE_ENUM:
        item = field.enum_type.values_by_number.get(value)
        return item.name if item is not None else value
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return flatten(value)
    return value


def _is_map(field):
    return (field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


def _is_repeated(field):
    # FieldDescriptor.label is deprecated in newer protobuf releases.
    if hasattr(field, "is_repeated"):
        return field.is_repeated
    return field.label == FieldDescriptor.LABEL_REPEATED


def flatten(message, prefix="", out=None):
    """One flat dict of a message: {"a.b.c": value} for every scalar field (see module doc)."""
    out = {} if out is None else out
    for field in message.DESCRIPTOR.fields:
        key = prefix + field.name
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[key] = {k: _value(value_field, v) for k, v in value.items()}
        elif _is_repeated(field):
            out[key] = [_value(field, v) for v in value]
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            flatten(value, key + ".", out)
        elif field.has_presence and not message.HasField(field.name):
            out[key] = None
        else:
            out[key] = _value(field, value)
    return out


def messages_frame(messages, message_type):
    """A DataFrame with one row per message; the columns of message_type even when empty."""
    columns = list(flatten(message_type()).keys())
    return pd.DataFrame([flatten(m) for m in messages], columns=columns)


def sweeps_frame(sweeps):
    """messages_frame of Sweeps plus one column per run state ("queued", "running",
    "succeeded", "failed", "cancelled") from run_counts, 0 where absent."""
    from xmod.v1 import types_pb2

    frame = messages_frame(sweeps, types_pb2.Sweep)
    for state in types_pb2.RunState.keys():
        if state == "RUN_STATE_UNSPECIFIED":
            continue
        frame[state.lower()] = [int(c.get(state, 0)) for c in frame["run_counts"]]
    return frame


def metrics_frame(rows):
    """A long DataFrame of metric points: run_id, name, step, tokens, flops, value.

    rows: (run_id, GetMetricsResponse) pairs."""
    records = []
    for run_id, response in rows:
        for series in response.series:
            for p in series.points:
                records.append((run_id, series.name or p.name, p.step, p.tokens, p.flops,
                                p.value))
    return pd.DataFrame.from_records(records, columns=METRIC_COLUMNS).astype(_METRIC_DTYPES)


def evals_frame(rows):
    """One row per (run, zero-shot task): run_id, task, n, acc, acc_stderr, acc_norm,
    acc_norm_stderr, ppl, ppl_stderr — the latest point of each eval/<task>/<field> series,
    NaN where the run reported none (acc_norm for LAMBADA, ppl for multiple choice, a standard
    error lm-evaluation-harness reports as N/A, or a run not evaluated yet).

    rows: (run_id, tasks, GetMetricsResponse) triples, tasks in the run spec's order."""
    records = []
    for run_id, tasks, response in rows:
        latest = {s.name: s.points[-1].value for s in response.series if s.points}
        for task in tasks:
            records.append([run_id, task] + [latest.get(f"eval/{task}/{field}", float("nan"))
                                             for field in EVAL_COLUMNS[2:]])
    frame = pd.DataFrame.from_records(records, columns=EVAL_COLUMNS)
    return frame.astype({c: "float64" for c in EVAL_COLUMNS[2:]} | {"run_id": "int64",
                                                                     "n": "Int64"})


def _typed(values):
    """A column of query text values (None = SQL NULL) with a type: int64 (nullable Int64
    when NULLs occur) when every value is an integer, float64 when every value is a number,
    else the text as strings."""
    present = [v for v in values if v is not None]
    if not present:
        return pd.Series(values, dtype="object")
    try:
        ints = [int(v) if v is not None else None for v in values]
        return pd.Series(ints, dtype="Int64" if None in ints else "int64")
    except ValueError:
        pass
    try:
        return pd.Series([float(v) if v is not None else float("nan") for v in values],
                         dtype="float64")
    except ValueError:
        return pd.Series(values, dtype="object")


def query_frame(response):
    """A QueryResponse as a DataFrame with typed columns (see _typed), in the server's column
    order (duplicate names kept); attrs["truncated"] says whether the server cut the rows at
    its limit."""
    columns = [
        _typed([None if (c < len(r.is_null) and r.is_null[c]) else r.values[c]
                for r in response.rows])
        for c in range(len(response.columns))
    ]
    if columns:
        frame = pd.concat(columns, axis=1, ignore_index=True)
        frame.columns = list(response.columns)
    else:
        frame = pd.DataFrame()
    frame.attrs["truncated"] = response.truncated
    return frame
