"""A missing emulator (moto, Azurite, fake-gcs-server) or Spark runtime skips a test
locally and fails it under ``CI=true``, saying what is missing."""

from __future__ import annotations

import pytest

from conftest import import_or_missing, missing


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_missing_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="Azurite is not installed"):
        missing("Azurite is not installed")


@pytest.mark.parametrize("ci", ["true", "TRUE", "1"])
def test_missing_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"no fake-gcs-server binary.*CI=true"):
        missing("no fake-gcs-server binary")


def test_an_absent_module_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"moto .* is not installed"):
        import_or_missing("pqindex_no_such_module", "moto (the S3 emulator)")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="moto"):
        import_or_missing("pqindex_no_such_module", "moto (the S3 emulator)")
    assert import_or_missing("json", "json").dumps([1]) == "[1]"
