"""Storage errors, and the one place where store exceptions become them.

obstore, fsspec and the OS raise their own exceptions (with Rust debug dumps in
obstore's case); :func:`translate` turns each into a :class:`StorageError`
subclass naming the URL and the operation, so no raw store traceback reaches a
user.
"""

from __future__ import annotations

import re

from pqindex.errors import PqIndexError, UserInputError
from pqindex.errors import StorageError as _StorageRoot

__all__ = [
    "ObjectChangedError",
    "ObjectNotFoundError",
    "StorageAccessError",
    "StorageConfigError",
    "StorageError",
    "StorageTimeoutError",
    "ThrottledError",
    "s3_error",
    "translate",
]


class StorageError(_StorageRoot):
    """A request to a store or the local file system failed; ``path`` is the URL or
    path, ``operation`` what was tried."""

    operation: str = ""
    detail: str = ""
    # A request pqindex sent itself: the store's HTTP status and error code, if it
    # answered (None: the connection failed), and whether sending again may succeed.
    status: int | None = None
    code: str = ""
    transient: bool = False

    def __init__(self, message: str, *, path: str, operation: str, status: int | None = None,
                 code: str = "", transient: bool = False) -> None:
        self.operation = operation
        self.detail = message
        self.status, self.code, self.transient = status, code, transient
        super().__init__(f"{operation} failed: {message}", path=path)

    def located(self, *, path: str | None = None, row_group: int | None = None,
                column: str | None = None, offset: int | None = None) -> PqIndexError:
        err = super().located(path=path, row_group=row_group, column=column, offset=offset)
        return self._keep(err)

    def with_path(self, path: str) -> PqIndexError:
        return self._keep(super().with_path(path))

    def _keep(self, err: PqIndexError) -> PqIndexError:
        # The copy keeps what was tried and any note (an upload left open, say).
        if isinstance(err, StorageError):
            err.operation, err.detail = self.operation, self.detail
            err.status, err.code, err.transient = self.status, self.code, self.transient
        for note in getattr(self, "__notes__", ()):
            err.add_note(note)
        return err


class ObjectNotFoundError(StorageError):
    """The bucket, container or object does not exist."""


class StorageAccessError(StorageError):
    """Credentials are missing, invalid, or refused for this object."""


class ThrottledError(StorageError):
    """The store kept answering "slow down" after every retry."""


class StorageTimeoutError(StorageError):
    """The store did not answer in time (after the retries)."""


class ObjectChangedError(StorageError):
    """The object changed while it was being read (its ETag or version differs)."""


class StorageConfigError(StorageError, UserInputError):
    """A storage option is unknown or has a bad value."""


def _first_line(text: str) -> str:
    head = text.split("\n\nDebug source", 1)[0].strip()
    head = head.split("\n", 1)[0]
    # obstore repeats the XML body; the S3 error code is the useful part.
    return head if len(head) <= 300 else head[:297] + "..."


def _s3_code(text: str) -> str | None:
    start = text.find("<Code>")
    if start < 0:
        return None
    end = text.find("</Code>", start)
    return text[start + 6 : end] if end > start else None


_ACCESS_CODES = (
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationHeaderMalformed",
    "AuthenticationFailed",
    "AuthorizationFailure",
)


def translate(exc: BaseException, url: str, operation: str) -> PqIndexError:
    """The :class:`PqIndexError` to raise for ``exc``, a failure of ``operation`` on ``url``.

    obstore's typed exceptions (``obstore.exceptions``: not found, precondition,
    permission, authentication, configuration) and Python's (``FileNotFoundError``,
    ``PermissionError``, ``TimeoutError``, ``ConnectionError``) decide the class.
    obstore has no type for an HTTP error that is none of those (throttling, 5xx):
    its ``GenericError`` carries the store's answer, whose S3 ``<Code>`` and HTTP
    status are read from it."""
    if isinstance(exc, PqIndexError):
        return exc
    from pqindex.io.native import exception_classes

    ex = exception_classes()
    full = str(exc)
    code = _s3_code(full)
    detail = f"{code}: {_first_line(full)}" if code else _first_line(full)
    if isinstance(exc, ex.UnknownConfigurationKeyError):
        return StorageConfigError(detail, path=url, operation=operation)
    if code in ("NoSuchBucket", "NoSuchContainer", "ContainerNotFound"):
        return ObjectNotFoundError(f"the bucket does not exist ({detail})", path=url,
                                   operation=operation)
    if isinstance(exc, (FileNotFoundError, ex.NotFoundError)):
        return ObjectNotFoundError(f"no such object ({detail})", path=url, operation=operation)
    if isinstance(exc, (ex.PreconditionError, ex.NotModifiedError)):
        return ObjectChangedError(
            f"the object changed while it was read (ETag/version mismatch; {detail})",
            path=url,
            operation=operation,
        )
    if isinstance(exc, (ex.PermissionDeniedError, ex.UnauthenticatedError, PermissionError)):
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if isinstance(exc, TimeoutError):
        return StorageTimeoutError(f"timed out ({detail})", path=url, operation=operation)
    if isinstance(exc, ConnectionError):
        return StorageError(f"cannot connect to the store ({detail})", path=url,
                            operation=operation)
    if isinstance(exc, ex.BaseError):
        return _generic(exc, code, detail, url, operation)
    if isinstance(exc, OSError) and exc.strerror:
        return StorageError(exc.strerror, path=url, operation=operation)
    if isinstance(exc, ValueError):  # obstore's builders refuse bad option values so
        return StorageConfigError(detail, path=url, operation=operation)
    return StorageError(detail or type(exc).__name__, path=url, operation=operation)


_STATUS = re.compile(r"\b(?:status|Status)[: ]+(\d{3})\b|\b(\d{3}) [A-Z][a-z]")


def _generic(exc: BaseException, code: str | None, detail: str, url: str,
             operation: str) -> StorageError:
    """An obstore error of no specific type: the store's code and HTTP status in the
    answer it carries, else how the request failed (obstore's source chain)."""
    text = str(exc).split("\n\nDebug source", 1)[0]
    found = _STATUS.search(text)
    status = int(found.group(1) or found.group(2)) if found else None
    if code in _ACCESS_CODES or status in (401, 403):
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if code in _THROTTLE_CODES or status in (429, 503):
        return ThrottledError(f"throttled by the store after retries ({detail})", path=url,
                              operation=operation)
    if url.startswith("http://") and status is None and "builder" in text.lower():
        return StorageConfigError(
            "plain http:// needs the storage option allow_http=true", path=url,
            operation=operation)
    chain = str(exc).lower()
    if "timed out" in chain or "timedout" in chain:
        return StorageTimeoutError(f"timed out ({detail})", path=url, operation=operation)
    if status is None and "error sending request" in chain:
        return StorageError(f"cannot connect to the store ({detail})", path=url,
                            operation=operation)
    return StorageError(detail, path=url, operation=operation, status=status, code=code or "")


_THROTTLE_CODES = ("SlowDown", "ServerBusy", "RequestLimitExceeded", "TooManyRequests")


def s3_error(status: int, code: str | None, message: str, url: str,
             operation: str) -> StorageError:
    """The :class:`StorageError` for an S3 error response (HTTP status, ``<Code>``,
    ``<Message>``) to a request pqindex signed itself (``io.s3multipart``)."""
    detail = f"HTTP {status}" + (f" {code}" if code else "") + (f": {message}" if message else "")

    def make(cls: type[StorageError], text: str, transient: bool = False) -> StorageError:
        return cls(text, path=url, operation=operation, status=status, code=code or "",
                   transient=transient)

    if status == 412 or code in ("PreconditionFailed", "ConditionalRequestConflict"):
        # 409 ConditionalRequestConflict: a concurrent write won the race.
        return make(ObjectChangedError,
                    f"the object changed while it was read (ETag/version mismatch; {detail})")
    if code in ("NoSuchBucket", "NoSuchKey", "NoSuchUpload") or (status == 404 and not code):
        what = {"NoSuchBucket": "the bucket does not exist",
                "NoSuchUpload": "no such multipart upload"}.get(code or "", "no such object")
        return make(ObjectNotFoundError, f"{what} ({detail})")
    if status in (401, 403) or code in _ACCESS_CODES:
        return make(StorageAccessError, f"access denied or no valid credentials ({detail})")
    if status in (429, 503) or code in _THROTTLE_CODES:
        return make(ThrottledError, f"throttled by the store after retries ({detail})", True)
    return make(StorageError, detail, status >= 500 or code == "InternalError")
