"""Storage options (credentials) as data source options that Spark redacts.

Options of a data source travel in the plan, and Spark prints plans: a Spark
Connect server writes each request's plan as text into its event log (the
operation's statement, job and stage descriptions), and ``explain()`` shows it.
Spark's key-based redaction (``spark.redaction.regex``,
``spark.sql.redaction.options.regex``) does not reach that text: an option
named ``...secret...`` still shows its value there (checked on PySpark 4.3).
What does is ``spark.sql.redaction.string.regex``, applied to the statement
text, job descriptions, SQL execution descriptions and ``explain()`` output.

So the storage options go as one value ``pqindex-redacted:<base64url JSON>`` and
the session's string-redaction regex is extended (never replaced) with a
pattern matching that whole value: wherever Spark prints the plan, the value
reads ``*********(redacted)``. The data source's reader and writer decode it
on Spark's Python workers; a plain JSON object is accepted too.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from pqindex.errors import UserInputError

__all__ = ["MARK", "PATTERN", "REDACTION_CONF", "hide", "reveal"]

MARK = "pqindex-redacted:"
# The marker and the whole base64url payload (padding included).
PATTERN = "pqindex-redacted:[A-Za-z0-9_=-]*"
REDACTION_CONF = "spark.sql.redaction.string.regex"


def ensure_redaction(spark: Any) -> None:
    """Make ``spark``'s session redact :data:`PATTERN` in the strings Spark prints
    (added to any regex already set)."""
    try:
        current = spark.conf.get(REDACTION_CONF, None)
    except Exception:  # an unset optional conf: some versions raise instead
        current = None
    if current and PATTERN in current:
        return
    try:
        spark.conf.set(REDACTION_CONF, f"(?:{current})|{PATTERN}" if current else PATTERN)
    except Exception as e:
        raise UserInputError(
            f"cannot set {REDACTION_CONF} in this session, so storage options would show "
            f"in Spark's plans and logs: give credentials through the environment "
            f"(AWS_* etc.) of the driver and executors instead ({type(e).__name__})") from None


def hide(spark: Any, storage_options: Mapping[str, Any]) -> str:
    """The option value that carries ``storage_options`` redacted in ``spark``."""
    ensure_redaction(spark)
    raw = json.dumps({str(k): v for k, v in storage_options.items()}, sort_keys=True,
                     default=str)
    return MARK + base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def reveal(value: str | None) -> dict[str, Any]:
    """The storage options of an option value (:func:`hide`'s, or a JSON object)."""
    if not value:
        return {}
    text = value
    if value.startswith(MARK):
        try:
            text = base64.urlsafe_b64decode(value[len(MARK):].encode("ascii")).decode()
        except (binascii.Error, UnicodeError, ValueError):
            raise UserInputError("option storage_options is not pqindex's encoding") from None
    try:
        raw = json.loads(text)
    except ValueError:
        raise UserInputError("option storage_options must be a JSON object") from None
    if not isinstance(raw, dict):
        raise UserInputError("option storage_options must be a JSON object")
    return {str(k): v for k, v in raw.items()}
