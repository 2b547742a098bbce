"""AWS Signature Version 4 for S3 requests (the ``Authorization`` header form).

obstore signs the requests it makes; the few S3 requests it cannot make
(``UploadPartCopy`` with a byte range, see ``io.s3multipart``) are signed here.
The steps are the documented ones: a canonical request (method, encoded path,
sorted query, sorted lower-case headers, payload hash), a string to sign (its
SHA-256 with the date and the credential scope), and an HMAC chain from the
secret key through date, region and service to the signature.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["EMPTY_SHA256", "Credentials", "canonical_request", "sign", "uri_encode"]

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Credentials:
    """Static AWS credentials; ``session_token`` for temporary ones (STS)."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"Credentials(access_key_id={self.access_key_id!r}, ...)"


def uri_encode(text: str, *, keep_slash: bool = False) -> str:
    """S3's URI encoding: every byte but ``A-Za-z0-9-_.~`` as ``%XX`` (upper case),
    ``/`` kept in object-key paths. S3 paths are encoded once, not twice."""
    return urllib.parse.quote(text, safe="-_.~/" if keep_slash else "-_.~")


def _canonical_query(query: Iterable[tuple[str, str]]) -> str:
    pairs = sorted((uri_encode(k), uri_encode(v)) for k, v in query)
    return "&".join(f"{k}={v}" for k, v in pairs)


def _canonical_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """(canonical header block, signed header names): names lower-cased, values
    trimmed with inner runs of spaces collapsed, sorted by name."""
    norm: dict[str, str] = {}
    for name, value in headers.items():
        norm[name.strip().lower()] = " ".join(str(value).split())
    names = sorted(norm)
    block = "".join(f"{n}:{norm[n]}\n" for n in names)
    return block, ";".join(names)


def canonical_request(method: str, path: str, query: Iterable[tuple[str, str]],
                      headers: Mapping[str, str], payload_sha256: str) -> tuple[str, str]:
    """(canonical request, signed headers) of a request; ``path`` as sent (encoded)."""
    block, signed = _canonical_headers(headers)
    text = "\n".join([method.upper(), path or "/", _canonical_query(query), block, signed,
                      payload_sha256])
    return text, signed


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    k = _hmac(("AWS4" + secret).encode("utf-8"), day)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def sign(
    method: str,
    host: str,
    path: str,
    query: Iterable[tuple[str, str]],
    headers: Mapping[str, str],
    payload_sha256: str,
    credentials: Credentials,
    region: str,
    when: _dt.datetime | None = None,
    service: str = "s3",
) -> dict[str, str]:
    """The headers to send: ``headers`` plus ``Host``, ``x-amz-date``,
    ``x-amz-content-sha256``, ``x-amz-security-token`` (with a session token) and
    ``Authorization``. Every header passed in is signed."""
    now = (when or _dt.datetime.now(_dt.UTC)).astimezone(_dt.UTC)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    out = {k: str(v) for k, v in headers.items()}
    out["Host"] = host
    out["x-amz-date"] = stamp
    out["x-amz-content-sha256"] = payload_sha256
    if credentials.session_token:
        out["x-amz-security-token"] = credentials.session_token
    creq, signed = canonical_request(method, path, list(query), out, payload_sha256)
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([_ALGORITHM, stamp, scope,
                         hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    key = _signing_key(credentials.secret_access_key, day, region, service)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"{_ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
                            f"SignedHeaders={signed}, Signature={signature}")
    return out
