"""Replacing one marked section of docs/benchmarks.md (the bench scripts' output)."""

from __future__ import annotations

from pathlib import Path


def replace_section(doc: Path, start: str, end: str, section: str) -> None:
    """Put ``section`` (which begins with ``start`` and ends with ``end``) where the
    marked section was, or at the end of ``doc`` the first time."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if start in text and end in text:
        text = text[: text.index(start)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)
