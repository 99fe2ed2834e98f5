"""Messages in and out: specs from files, text or dicts, and messages as dicts.

Input: a SweepSpec (or any xmod.v1 message) may be given as a message, a dict in protobuf's
JSON mapping (field names as in the .proto or lowerCamelCase; enums by name), a string of
protobuf text format or JSON, or the path of a file (.textpb/.txtpb/.pbtxt/.textproto for
text format, .json for JSON), as `xmodctl sweep submit` reads them.

Output: `to_dict` is protobuf's JSON mapping with the .proto field names
(preserving_proto_field_name) and every field without presence printed, defaults included
(always_print_fields_with_no_presence), so a dict has the same keys for every message of a
type. As in JSON, 64-bit integers are strings ("id": "3"), enums are names and unset
`optional` fields and sub-messages are absent.
"""
import json
import os

import grpc
from google.protobuf import json_format, text_format
from google.protobuf.message import Message

from xmod.errors import XmodError, invalid_argument

TEXT_EXTENSIONS = (".textpb", ".txtpb", ".pbtxt", ".textproto")
JSON_EXTENSIONS = (".json",)


def to_dict(message):
    """The message as a dict in protobuf's JSON mapping (see the module docstring)."""
    try:
        return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26 names the option differently
        return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                         including_default_value_fields=True)


def to_json(message, indent=2):
    """to_dict(message) as JSON text."""
    return json.dumps(to_dict(message), indent=indent)


def _looks_like_path(text):
    return "\n" not in text and text.strip().lower().endswith(TEXT_EXTENSIONS + JSON_EXTENSIONS)


def parse_message(value, message_type, name=None):
    """A new message_type from a message, dict, path or text (see the module docstring).

    Raises XmodError(INVALID_ARGUMENT) naming `name` (the file, or "spec") for text that does
    not parse, unknown fields and values of the wrong type; NOT_FOUND for a missing file.
    """
    message = message_type()
    label = name or message_type.DESCRIPTOR.name
    if isinstance(value, Message):
        if value.DESCRIPTOR.full_name != message_type.DESCRIPTOR.full_name:
            raise invalid_argument(f"{label}: expected {message_type.DESCRIPTOR.full_name}, "
                                   f"got {value.DESCRIPTOR.full_name}")
        message.CopyFrom(value)
        return message
    if isinstance(value, dict):
        try:
            json_format.ParseDict(value, message)
        except json_format.ParseError as e:
            raise invalid_argument(f"{label}: {e}") from None
        return message
    if isinstance(value, os.PathLike) or (isinstance(value, str) and _looks_like_path(value)):
        return parse_file(os.fspath(value), message_type)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise invalid_argument(f"{label}: expected a {message_type.DESCRIPTOR.name} message, "
                               f"dict, file path or text, got {type(value).__name__}")
    if os.path.isfile(value):
        return parse_file(value, message_type)
    return parse_text(value, message_type, label,
                      json_syntax=value.lstrip().startswith("{"))


def parse_text(text, message_type, name, json_syntax):
    """Text format (json_syntax False) or JSON text as a new message_type."""
    message = message_type()
    try:
        if json_syntax:
            json_format.Parse(text, message)
        else:
            text_format.Parse(text, message)
    except (json_format.ParseError, text_format.ParseError) as e:
        raise invalid_argument(f"{name}:{e}") from None
    return message


def parse_file(path, message_type):
    """A spec file as xmodctl reads it: the syntax comes from the extension."""
    lower = path.lower()
    if lower.endswith(JSON_EXTENSIONS):
        json_syntax = True
    elif lower.endswith(TEXT_EXTENSIONS):
        json_syntax = False
    else:
        raise invalid_argument(f"{path}: unknown spec extension (use .textpb, .txtpb, .pbtxt "
                               "for text format or .json)")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise XmodError(grpc.StatusCode.NOT_FOUND, f"{path}: no such file") from None
    return parse_text(text, message_type, path, json_syntax)


def absolutize_data_globs(spec, base_dir=None):
    """Makes a SweepSpec's relative data globs absolute against base_dir (default: the working
    directory), as xmodctl does, so a spec means the same files wherever the coordinator
    runs. Changes spec in place."""
    base = base_dir or os.getcwd()
    for field in ("train_glob", "val_glob"):
        glob = getattr(spec.data, field)
        if glob and not glob.startswith("/"):
            setattr(spec.data, field, os.path.join(base, glob))
