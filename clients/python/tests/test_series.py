"""xmod.series reads the series' names from the one definition (series.proto): the names the
results database has always stored, every Series value but UNSPECIFIED, none twice."""
import xmod
from xmod.v1 import series_pb2


def test_names_are_the_stored_ones():
    assert xmod.series.TRAIN_LOSS == "train/loss"
    assert xmod.series.VAL_LOSS == "val/loss"
    assert xmod.series.LIVE_DELTA == "delta/live"
    assert xmod.series.EVAL_PREFIX == "eval/"


def test_every_series_is_named_once():
    names = xmod.series.NAMES
    assert len(names) == len(series_pb2.Series.DESCRIPTOR.values) - 1
    assert len(set(names.values())) == len(names)
