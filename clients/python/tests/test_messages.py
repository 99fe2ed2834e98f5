"""Specs from files, text and dicts; messages as dicts (xmod.messages)."""
import json
import os
import pathlib

import grpc
import pytest

import xmod
from xmod.messages import absolutize_data_globs, parse_message, to_dict
from xmod.v1 import spec_pb2, types_pb2

REPO = pathlib.Path(__file__).resolve().parents[3]

SPEC_TEXT = """
name: "tiny"
grids { label: "xmod" archs: XMOD backbones: "cpu-d64" seq_lens: 128 ks: [2, 4] as: 1 }
training { flop_budget: 1e11 seq_len: 128 batch_tokens: 512 }
data { train_glob: "corpus/*_train_*.bin" val_glob: "/abs/*_val_*.bin" }
"""
SPEC_DICT = {
    "name": "tiny",
    "grids": [{"label": "xmod", "archs": ["XMOD"], "backbones": ["cpu-d64"], "seq_lens": [128],
               "ks": [2, 4], "as": [1]}],
    "training": {"flop_budget": 1e11, "seq_len": 128, "batch_tokens": 512},
    "data": {"train_glob": "corpus/*_train_*.bin", "val_glob": "/abs/*_val_*.bin"},
}


def expected():
    return parse_message(SPEC_TEXT, spec_pb2.SweepSpec)


def test_text_dict_json_and_message_agree():
    spec = expected()
    assert spec.name == "tiny" and list(spec.grids[0].ks) == [2, 4]
    assert parse_message(SPEC_DICT, spec_pb2.SweepSpec) == spec
    assert parse_message(json.dumps(SPEC_DICT), spec_pb2.SweepSpec) == spec
    assert parse_message(spec, spec_pb2.SweepSpec) == spec
    # lowerCamelCase JSON names are accepted too, as protobuf's JSON parser does.
    camel = dict(SPEC_DICT, training={"flopBudget": 1e11, "seqLen": 128, "batchTokens": 512})
    assert parse_message(camel, spec_pb2.SweepSpec) == spec


def test_files_by_extension(tmp_path):
    spec = expected()
    for name, text in [("a.textpb", SPEC_TEXT), ("b.txtpb", SPEC_TEXT), ("c.pbtxt", SPEC_TEXT),
                       ("d.json", json.dumps(SPEC_DICT))]:
        path = tmp_path / name
        path.write_text(text)
        assert parse_message(path, spec_pb2.SweepSpec) == spec  # os.PathLike
        assert parse_message(str(path), spec_pb2.SweepSpec) == spec


def test_errors_are_invalid_argument_and_name_the_problem(tmp_path):
    with pytest.raises(xmod.XmodError) as e:
        parse_message({"grids": [{"kz": [1]}]}, spec_pb2.SweepSpec, "spec")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "kz" in e.value.message
    with pytest.raises(xmod.XmodError) as e:
        parse_message('name: "x"\ngrids { ks: "two" }', spec_pb2.SweepSpec, "spec")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("spec:2:")
    bad = tmp_path / "spec.yaml"
    bad.write_text("name: x")
    with pytest.raises(xmod.XmodError, match="unknown spec extension"):
        parse_message(bad, spec_pb2.SweepSpec)
    with pytest.raises(xmod.XmodError) as e:
        parse_message(str(tmp_path / "missing.textpb"), spec_pb2.SweepSpec)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(xmod.XmodError, match="got int"):
        parse_message(3, spec_pb2.SweepSpec)
    with pytest.raises(xmod.XmodError, match="expected xmod.v1.SweepSpec"):
        parse_message(spec_pb2.ModelSpec(), spec_pb2.SweepSpec)


def test_every_example_spec_parses():
    examples = sorted((REPO / "examples").rglob("*.textpb"))
    assert examples, REPO
    for path in examples:
        message_type = spec_pb2.SweepSpec
        if path.name.endswith("_study.textpb"):
            from xmod.v1 import coordinator_pb2
            message_type = coordinator_pb2.StudySpec
        parse_message(path, message_type)


def test_to_dict_is_the_json_mapping_with_defaults():
    run = types_pb2.Run(id=3, sweep_id=1, name="r", state=types_pb2.SUCCEEDED)
    d = to_dict(run)
    assert d["id"] == "3" and d["sweep_id"] == "1"  # int64 as strings, as in JSON
    assert d["state"] == "SUCCEEDED"
    assert d["attempts"] == 0 and d["error"] == "" and d["held_out"] is False  # defaults
    assert "spec" not in d and "progress" not in d  # unset sub-messages stay absent
    model = to_dict(spec_pb2.ModelSpec(arch=spec_pb2.XMOD, k=4))
    assert "n0" not in model and "tau" not in model  # unset proto3 optional fields
    assert to_dict(spec_pb2.ModelSpec(n0=0))["n0"] == 0  # set, even to 0
    assert json.loads(xmod.messages.to_json(run)) == d


def test_absolutize_data_globs():
    spec = expected()
    absolutize_data_globs(spec, "/work/dir")
    assert spec.data.train_glob == "/work/dir/corpus/*_train_*.bin"
    assert spec.data.val_glob == "/abs/*_val_*.bin"
    spec = expected()
    absolutize_data_globs(spec)
    assert spec.data.train_glob == os.path.join(os.getcwd(), "corpus/*_train_*.bin")
