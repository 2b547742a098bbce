"""Storage errors, and the one place where store exceptions become them.

obstore, fsspec and the OS raise their own exceptions (with Rust debug dumps in
obstore's case); :func:`translate` turns each into a :class:`StorageError`
subclass naming the URL and the operation, so no raw store traceback reaches a
user.
"""

from __future__ import annotations

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

    def __init__(self, message: str, *, path: str, operation: str) -> None:
        self.operation = operation
        self.detail = message
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
    """The :class:`PqIndexError` to raise for ``exc``, a failure of ``operation`` on ``url``."""
    if isinstance(exc, PqIndexError):
        return exc
    full = str(exc)
    code = _s3_code(full)
    detail = f"{code}: {_first_line(full)}" if code else _first_line(full)
    name = type(exc).__name__
    # Classify on the message, not on obstore's debug dump (it names every setting).
    text = full.split("\n\nDebug source", 1)[0]
    lower = text.lower()
    if "builder error" in lower and url.startswith("http://"):
        return StorageConfigError(
            "plain http:// needs the storage option allow_http=true", path=url,
            operation=operation)
    if code in ("NoSuchBucket", "NoSuchContainer", "ContainerNotFound"):
        return ObjectNotFoundError(f"the bucket does not exist ({detail})", path=url,
                                   operation=operation)
    if isinstance(exc, FileNotFoundError) or name == "NotFoundError" or code in (
        "NoSuchKey", "BlobNotFound", "NotFound"
    ):
        return ObjectNotFoundError(f"no such object ({detail})", path=url, operation=operation)
    if name == "PreconditionError" or code == "PreconditionFailed":
        return ObjectChangedError(
            f"the object changed while it was read (ETag/version mismatch; {detail})",
            path=url,
            operation=operation,
        )
    if (
        name in ("PermissionDeniedError", "UnauthenticatedError")
        or isinstance(exc, PermissionError)
        or code in _ACCESS_CODES
        or "403 forbidden" in lower
        or "401 unauthorized" in lower
        or "credential" in lower
    ):
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if code in ("SlowDown", "ServerBusy", "RequestLimitExceeded", "TooManyRequests") or any(
        s in lower for s in ("503 service unavailable", "429 too many requests", "slowdown")
    ):
        return ThrottledError(f"throttled by the store after retries ({detail})", path=url,
                              operation=operation)
    full_lower = full.lower()
    if isinstance(exc, TimeoutError) or "timed out" in full_lower or "timedout" in full_lower:
        return StorageTimeoutError(f"timed out ({detail})", path=url, operation=operation)
    if name == "UnknownConfigurationKeyError" or (
        isinstance(exc, ValueError) and "config" in lower
    ):
        return StorageConfigError(detail, path=url, operation=operation)
    if "error sending request" in lower or isinstance(exc, ConnectionError):
        return StorageError(f"cannot connect to the store ({detail})", path=url,
                            operation=operation)
    if isinstance(exc, OSError) and exc.strerror:
        return StorageError(exc.strerror, path=url, operation=operation)
    return StorageError(detail or name, path=url, operation=operation)


def s3_error(status: int, code: str | None, message: str, url: str,
             operation: str) -> StorageError:
    """The :class:`StorageError` for an S3 error response (HTTP status, ``<Code>``,
    ``<Message>``) to a request pqindex signed itself (``io.s3multipart``)."""
    detail = f"HTTP {status}" + (f" {code}" if code else "") + (f": {message}" if message else "")
    if status == 412 or code in ("PreconditionFailed", "ConditionalRequestConflict"):
        # 409 ConditionalRequestConflict: a concurrent write won the race.
        return ObjectChangedError(
            f"the object changed while it was read (ETag/version mismatch; {detail})",
            path=url, operation=operation)
    if code in ("NoSuchBucket", "NoSuchKey", "NoSuchUpload") or (status == 404 and not code):
        what = {"NoSuchBucket": "the bucket does not exist",
                "NoSuchUpload": "no such multipart upload"}.get(code or "", "no such object")
        return ObjectNotFoundError(f"{what} ({detail})", path=url, operation=operation)
    if status in (401, 403) or code in _ACCESS_CODES:
        return StorageAccessError(f"access denied or no valid credentials ({detail})",
                                  path=url, operation=operation)
    if status in (429, 503) or code in ("SlowDown", "RequestLimitExceeded", "TooManyRequests"):
        return ThrottledError(f"throttled by the store after retries ({detail})", path=url,
                              operation=operation)
    return StorageError(detail, path=url, operation=operation)
