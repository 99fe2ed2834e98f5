"""xmod: the Python client of the xmod coordinator (docs/python-client.md).

    import xmod
    client = xmod.Client("127.0.0.1:7070", token_file="~/.xmod/token")
    sweep = client.submit("examples/tiny.textpb")
    for event in client.watch(sweep["sweep_id"]):
        ...
    runs = client.runs(sweep["sweep_id"])            # pandas DataFrame
    curves = client.metrics(runs.run_id, [xmod.series.VAL_LOSS])
"""
from xmod import series
from xmod.client import Client, read_token
from xmod.errors import XmodError
from xmod.messages import parse_message, to_dict

__all__ = ["Client", "XmodError", "parse_message", "read_token", "series", "to_dict"]
__version__ = "0.1.0"
