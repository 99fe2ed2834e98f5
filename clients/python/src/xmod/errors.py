"""XmodError: every failure the client reports, local (a spec that does not parse) or remote
(a gRPC status from the coordinator)."""
import grpc

# The trailing metadata the coordinator attaches to every error it returns itself
# (common/status_origin.h): with it, UNAVAILABLE means the coordinator answered (its database
# cannot be written for now) rather than that it could not be reached.
STATUS_ORIGIN_KEY = "xmod-status-origin"
STATUS_ORIGIN_COORDINATOR = "coordinator"


class XmodError(Exception):
    """A failed call or an invalid input.

    Attributes:
      code: a grpc.StatusCode (INVALID_ARGUMENT for local spec errors too).
      message: the coordinator's message, unchanged (an INVALID_ARGUMENT one names the field
        path, e.g. "grids[0].ks[1]: K must be >= 1"), or the local error's text.
      addr: the coordinator's address, for remote errors.
      answered: whether the coordinator itself returned the status (its status origin in the
        trailing metadata), as opposed to gRPC failing to reach it.

    str(error) is "CODE: message", with a hint naming the address and the token source for
    UNAVAILABLE (when the coordinator did not answer it itself: `answered` is False),
    UNAUTHENTICATED and DEADLINE_EXCEEDED, as xmodctl words them.
    """

    def __init__(self, code, message, addr=None, answered=False):
        self.code = code
        self.message = message
        self.addr = addr
        self.answered = answered
        super().__init__(self._text())

    @property
    def code_name(self):
        """The status code's name, e.g. "NOT_FOUND"."""
        return self.code.name

    def _text(self):
        where = f"the coordinator at {self.addr}" if self.addr else "the coordinator"
        if self.code == grpc.StatusCode.UNAVAILABLE and self.addr and not self.answered:
            return f"UNAVAILABLE: cannot reach {where}: {self.message}"
        if self.code == grpc.StatusCode.UNAUTHENTICATED:
            return (f"UNAUTHENTICATED: {where} refused the token (token=, token_file=, "
                    f"XMOD_TOKEN_FILE or XMOD_TOKEN): {self.message}")
        return f"{self.code.name}: {self.message}"

    @classmethod
    def from_rpc(cls, error, addr):
        """The XmodError of a grpc.RpcError (a failed call or a broken stream)."""
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
        answered = (STATUS_ORIGIN_KEY, STATUS_ORIGIN_COORDINATOR) in tuple(trailers or ())
        return cls(code, details or "", addr, answered)


def invalid_argument(message):
    return XmodError(grpc.StatusCode.INVALID_ARGUMENT, message)
