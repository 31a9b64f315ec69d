"""The exceptions of tfrecord_lirs' TensorFlow-free API (`DataSource`, `Sampler`, ...).

One class per kind of error the Rust core reports; the message is the core's and names
the file, instance and byte where they apply, which are also attributes (`file`,
`instance`, `offset`; `None` where they do not apply). Each also derives from the
built-in exception a Python caller would catch for that mistake.
"""


class LIRSError(Exception):
    """Base class: an error reported by the tfrecord-lirs core."""

    file = None
    instance = None
    offset = None


class DataLossError(LIRSError, OSError):
    """Damaged or changed data: a bad CRC, a truncated record, a damaged table, a file
    truncated or rewritten after its table was written (docs/FORMAT.md, "Errors")."""


class InvalidArgumentError(LIRSError, ValueError):
    """A mistake in what was passed: a page size, a shard, a backend name, a mismatched
    table list, a GZIP/ZLIB file (use `tfrecord_lirs.pad`), another file's table."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (e.g. `deterministic="yes"`, `epoch_state="..."`):
    the core's rule for the argument's type; also a TypeError."""


class NotFoundError(LIRSError, FileNotFoundError):
    """A data file or offset table that does not exist."""


class PermissionDeniedError(LIRSError, PermissionError):
    """Access refused: a local file's permissions, object storage refusing the
    credentials (HTTP 401/403), or no credentials found; the message says which
    credentials are read from where."""


class UnavailableError(LIRSError, ConnectionError):
    """The storage did not serve the request even after the client's retries (server
    errors, timeouts, refused connections): trying again later may work."""


class InternalError(LIRSError, RuntimeError):
    """A fault inside the library (e.g. a panic in a read thread): please report it."""


__all__ = ["ArgumentTypeError", "DataLossError", "InternalError", "InvalidArgumentError", "LIRSError", "NotFoundError",
           "PermissionDeniedError", "UnavailableError"]
