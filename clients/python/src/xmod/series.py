"""The metric series' names (xmod.v1.Series, their one definition in series.proto).

    import xmod
    client.metrics(run_id, [xmod.series.VAL_LOSS])     # val/loss
    xmod.series.NAMES["TRAIN_LOSS"]                     # train/loss

Each Series value's `series_name` option is the string on the wire; NAMES maps the value's
name without "SERIES_" to it, and the fixed series are also module attributes.
"""
from xmod.v1 import series_pb2


def _names():
    names = {}
    for value in series_pb2.Series.DESCRIPTOR.values:
        name = value.GetOptions().Extensions[series_pb2.series_name]
        if name:
            names[value.name.removeprefix("SERIES_")] = name
    return names


NAMES = _names()
TRAIN_LOSS = NAMES["TRAIN_LOSS"]
VAL_LOSS = NAMES["VAL_LOSS"]
TOKENS_PER_SECOND = NAMES["TOKENS_PER_SECOND"]
LIVE_DELTA = NAMES["LIVE_DELTA"]
EVAL_PREFIX = NAMES["EVAL_PREFIX"]
