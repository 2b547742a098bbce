"""A pyiceberg FileIO that reads Iceberg's metadata files on S3 in one GET each.

pyiceberg's default FileIO (``PyArrowFileIO``) opens a file on S3 with a HEAD for its
size, then GETs it: loading a table (its ``metadata.json``) and reading each manifest
list and manifest costs two round trips where one would do. Configured the pyiceberg
way, as a catalog property::

    load_catalog("prod", **{"py-io-impl": "pqindex.dataset.tables.iceberg_io.PqIndexFileIO",
                            "s3.endpoint": ..., "s3.region": ...})

``new_input`` on S3 returns a file whose ``open`` is one GET of the whole object
through pqindex's store (obstore), with the catalog's ``s3.*`` credentials, region and
endpoint. Everything else is ``PyArrowFileIO``'s own: writes, deletes, other schemes,
a file's size asked before it is read, and every read where the catalog names an
S3 setting pqindex does not map (a role, a profile, a remote signer, a proxy,
timeouts): those keep pyarrow's S3 client, which honours them. Data files are read
by pyarrow's filesystem as before (pyiceberg's scans take it from this FileIO).

:func:`storage_options` gives the same settings as pqindex ``storage_options``, so
pqindex reads a table's files as its catalog would.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

from pyiceberg.io import InputFile, InputStream
from pyiceberg.io.pyarrow import PyArrowFileIO

__all__ = ["PqIndexFileIO", "storage_options", "table_storage_options"]

_S3_SCHEMES = ("s3", "s3a", "s3n")

# pyiceberg property -> pqindex (obstore) storage option; ``s3.*`` wins over ``client.*``.
_MAPPED = {
    "s3.endpoint": "endpoint",
    "s3.access-key-id": "access_key_id",
    "s3.secret-access-key": "secret_access_key",
    "s3.session-token": "session_token",
    "s3.region": "region",
    "s3.force-virtual-addressing": "virtual_hosted_style_request",
    "s3.anonymous": "skip_signature",
}
_CLIENT = {
    "client.access-key-id": "access_key_id",
    "client.secret-access-key": "secret_access_key",
    "client.session-token": "session_token",
    "client.region": "region",
}


def storage_options(properties: Mapping[str, Any]) -> dict[str, str] | None:
    """pqindex storage options for S3 from a pyiceberg catalog's or FileIO's
    ``properties``; None when they name an S3 setting pqindex does not map (pyarrow's
    client then does the reading)."""
    out: dict[str, str] = {}
    for key, value in properties.items():
        if key in _MAPPED:
            out[_MAPPED[key]] = str(value)
        elif key in _CLIENT:
            continue
        elif key.startswith("s3.") or key.startswith("client."):
            return None
    for key, name in _CLIENT.items():
        if key in properties:
            out.setdefault(name, str(properties[key]))
    if out.get("endpoint", "").startswith("http://"):
        out["allow_http"] = "true"
    return out


class _OneGet(InputFile):
    """An S3 object whose ``open`` is one GET of all its bytes (no HEAD first)."""

    def __init__(self, location: str, options: Mapping[str, str],
                 fallback: Callable[[], InputFile]) -> None:
        super().__init__(location)
        self._options = options
        self._fallback = fallback  # pyarrow's file (made when needed: its S3 client)
        self._data: bytes | None = None

    def _bytes(self) -> bytes:
        if self._data is None:
            from pqindex.io.objects import get_object

            data = get_object(self.location, self._options)
            if data is None:
                raise FileNotFoundError(f"Cannot open file, does not exist: {self.location}")
            self._data = data
        return self._data

    def __len__(self) -> int:
        # Asked before a read (a data file's size): a HEAD, not the whole object.
        return len(self._data) if self._data is not None else len(self._fallback())

    def exists(self) -> bool:
        return self._data is not None or self._fallback().exists()

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._bytes())


class PqIndexFileIO(PyArrowFileIO):
    """``PyArrowFileIO`` whose reads of S3 objects are one GET each."""

    def __init__(self, properties: Mapping[str, Any] | None = None) -> None:
        super().__init__(properties=dict(properties or {}))
        self._options = storage_options(self.properties)

    @property
    def storage_options(self) -> dict[str, str] | None:
        """The catalog's S3 settings as pqindex storage options (None: not mappable)."""
        return None if self._options is None else dict(self._options)

    def new_input(self, location: str) -> Any:
        scheme = location.partition("://")[0].lower() if "://" in location else ""
        if self._options is None or scheme not in _S3_SCHEMES:
            return super().new_input(location)
        return _OneGet(location, self._options, lambda: super(PqIndexFileIO, self)
                       .new_input(location))


def table_storage_options(table: Any) -> dict[str, str] | None:
    """A pyiceberg Table on S3: its S3 settings (its FileIO's properties, from its
    catalog) as pqindex storage options; None when it has none, one pqindex does not
    map, or the table is elsewhere (those settings are for S3 only)."""
    properties = getattr(getattr(table, "io", None), "properties", None)
    try:
        location = str(table.location())
    except Exception:  # not a pyiceberg Table after all
        return None
    if not isinstance(properties, Mapping) or location.partition("://")[0].lower() not in (
            _S3_SCHEMES):
        return None
    return storage_options(properties) or None
