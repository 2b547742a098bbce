"""One credential provider per S3 store, for obstore's requests and pqindex's own.

obstore signs the requests it makes; the few pqindex signs itself
(``io.s3multipart``: ``UploadPartCopy``) must use the very same credentials.
:func:`s3_credentials` picks them once per store configuration:

* static keys (storage options over the ``AWS_*`` variables): obstore reads them
  itself, and :class:`StaticCredentials` hands the same keys to the signer;
* otherwise botocore's chain (environment, shared config and profiles, SSO, web
  identity / IRSA, container credentials, instance roles), refreshed before
  expiry by botocore: :class:`Boto3Credentials` is given to obstore as its
  ``credential_provider`` and to the signer, so both always sign with the same,
  current keys;
* none (unsigned requests, boto3 not installed, or a chain that found nothing):
  obstore's own chain signs its reads, and the reason is kept, for the result of
  a server-side copy that could not be made.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pqindex.io.s3sign import Credentials

__all__ = ["Boto3Credentials", "CredentialSource", "S3CredentialChoice", "StaticCredentials",
           "s3_credentials", "s3_settings"]

# obstore asks again after this long: botocore refreshes temporary keys before they
# expire and hands back its cached ones until then, so asking is cheap.
_REASK = _dt.timedelta(minutes=5)

CredentialSource = Callable[[], Credentials]


def s3_settings(storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """``AWS_*`` environment variables overridden by the storage options, under
    obstore's key names without the ``aws_`` prefix (lower case)."""
    from pqindex.io.objstore import _ALIASES

    out: dict[str, str] = {}
    pairs = [(n, v) for n, v in os.environ.items() if n.upper().startswith("AWS_")]
    for raw, value in [*pairs, *((str(k), v) for k, v in (storage_options or {}).items())]:
        k = raw.lower()
        k = k[4:] if k.startswith("aws_") else k
        out[_ALIASES.get(k, k)] = str(value)
    return out


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


class StaticCredentials:
    """Keys given in the options or environment (a session token with them)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def __call__(self) -> Credentials:
        return self._credentials

    def __repr__(self) -> str:
        return f"StaticCredentials({self._credentials!r})"


class Boto3Credentials:
    """botocore's credential chain as obstore's ``credential_provider`` (called
    with no argument, it answers obstore's credential dict) and as the signer's
    source (:meth:`current`). Thread-safe; botocore refreshes temporary keys."""

    def __init__(self, botocore_credentials: Any, method: str) -> None:
        self._credentials = botocore_credentials
        self.method = method  # botocore's name for where they came from
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Boto3Credentials(method={self.method!r})"

    def current(self) -> Credentials:
        with self._lock:
            frozen = self._credentials.get_frozen_credentials()
        return Credentials(str(frozen.access_key), str(frozen.secret_key),
                           str(frozen.token) if frozen.token else None)

    def __call__(self) -> dict[str, Any]:
        c = self.current()
        refreshing = hasattr(self._credentials, "refresh_needed")
        return {"access_key_id": c.access_key_id, "secret_access_key": c.secret_access_key,
                "token": c.session_token,
                "expires_at": _dt.datetime.now(_dt.UTC) + _REASK if refreshing else None}


@dataclass(frozen=True)
class S3CredentialChoice:
    """What signs a store's requests: ``signer`` for pqindex's own (None: it cannot
    sign, ``reason`` says why), ``obstore_provider`` for obstore's (None: obstore
    reads the options and environment itself)."""

    signer: CredentialSource | None
    obstore_provider: Boto3Credentials | None = None
    reason: str = ""


def s3_credentials(storage_options: Mapping[str, Any] | None) -> S3CredentialChoice:
    """The credentials of an S3 store configured by ``storage_options`` (see the
    module)."""
    s = s3_settings(storage_options)
    if _flag(s.get("skip_signature")):
        return S3CredentialChoice(None, reason="requests are unsigned (skip_signature)")
    key_id, secret = s.get("access_key_id"), s.get("secret_access_key")
    if key_id and secret:
        static = Credentials(key_id, secret, s.get("session_token") or None)
        return S3CredentialChoice(StaticCredentials(static))
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        return S3CredentialChoice(None, reason=(
            "no static keys, and boto3 is not installed: obstore's own credential chain "
            "signs its requests but does not hand its credentials out "
            "(pip install 'pqindex[aws]')"))
    from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]

    try:
        found = boto3.Session().get_credentials()  # AWS_PROFILE names a profile
    except BotoCoreError as e:
        return S3CredentialChoice(None, reason=f"the AWS credential chain failed: {e}")
    if found is None:
        return S3CredentialChoice(None, reason="the AWS credential chain found no credentials")
    provider = Boto3Credentials(found, str(getattr(found, "method", "") or "boto3"))
    return S3CredentialChoice(provider.current, obstore_provider=provider)
