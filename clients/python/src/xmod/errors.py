"""XmodError: every failure the client reports, local (a spec that does not parse) or remote
(a gRPC status from the coordinator)."""
import grpc


class XmodError(Exception):
    """A failed call or an invalid input.

    Attributes:
      code: a grpc.StatusCode (INVALID_ARGUMENT for local spec errors too).
      message: the coordinator's message, unchanged (an INVALID_ARGUMENT one names the field
        path, e.g. "grids[0].ks[1]: K must be >= 1"), or the local error's text.
      addr: the coordinator's address, for remote errors.

    str(error) is "CODE: message", with a hint naming the address and the token source for
    UNAVAILABLE, UNAUTHENTICATED and DEADLINE_EXCEEDED, as xmodctl words them.
    """

    def __init__(self, code, message, addr=None):
        self.code = code
        self.message = message
        self.addr = addr
        super().__init__(self._text())

    @property
    def code_name(self):
        """The status code's name, e.g. "NOT_FOUND"."""
        return self.code.name

    def _text(self):
        where = f"the coordinator at {self.addr}" if self.addr else "the coordinator"
        if self.code == grpc.StatusCode.UNAVAILABLE and self.addr:
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
        return cls(code, details or "", addr)


def invalid_argument(message):
    return XmodError(grpc.StatusCode.INVALID_ARGUMENT, message)
