"""The test harness's S3 proxy (s3_server.py): in its thread and in a process of its
own (bench/tables.py), it logs each request, counts round trips and bytes, and holds
each request for its delay, as its own log records it (no test clock)."""

from __future__ import annotations

import time

import pytest

from conftest import import_or_missing
from s3_server import S3Endpoint, s3  # noqa: F401  (the session fixture)

# asyncio runs a timer up to its clock's resolution early (BaseEventLoop._run_once).
EARLY = time.get_clock_info("monotonic").resolution


@pytest.mark.parametrize("proxy_process", [False, True], ids=["thread", "process"])
def test_the_proxy_holds_each_request_for_its_delay_and_counts_it(proxy_process: bool) -> None:
    import_or_missing("moto.server", "moto (the S3 emulator, test extra)")
    ep = S3Endpoint(proxy_process=proxy_process)
    try:
        bucket = ep.new_bucket()
        ep.put(bucket, "k", b"x" * 1000)  # direct to moto: not logged
        client = ep.boto3(direct=False)
        ep.delay = 0.05
        assert ep.delay == 0.05
        ep.reset_log()
        assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x" * 1000
        client.put_object(Bucket=bucket, Key="k2", Body=b"y" * 10)
        got = ep.requests
        assert [(r.method, r.path) for r in got] == [("GET", f"/{bucket}/k"),
                                                     ("PUT", f"/{bucket}/k2")]
        for r in got:
            held = r.held()
            assert held is not None and held >= 0.05 - EARLY, (r.method, held)
        # One after the other: the PUT arrived once the GET was released.
        assert got[0].released is not None and got[1].received >= got[0].released
        assert ep.waves == 2 and ep.max_in_flight == 1
        assert ep.uploaded_bytes == 10 and ep.body_bytes >= 1000

        ep.delay = 0.0
        ep.reset_log()
        assert ep.requests == [] and ep.waves == 0 and ep.body_bytes == 0
        client.head_object(Bucket=bucket, Key="k2")
        (head,) = ep.requests
        assert head.method == "HEAD" and head.held() is not None
    finally:
        ep.stop()


def test_a_proxy_process_has_no_request_hooks() -> None:
    """Hooks are callables run in the proxy's thread: a proxy process cannot take them."""
    import_or_missing("moto.server", "moto (the S3 emulator, test extra)")
    ep = S3Endpoint(proxy_process=True)
    try:
        for knob, value in [("fail_next", 1), ("reject", lambda *_: True),
                            ("answer", lambda _: (412, "PreconditionFailed"))]:
            with pytest.raises(NotImplementedError, match="its own process"):
                setattr(ep, knob, value)
    finally:
        ep.stop()


def test_a_request_the_proxy_answers_itself_is_held_and_logged_too(
        s3: S3Endpoint) -> None:  # noqa: F811
    """A 503 from ``fail_next`` comes after the delay, as moto's answers do, and the
    retry that follows is logged as a request of its own."""
    bucket = s3.new_bucket()
    s3.put(bucket, "k", b"z" * 10)
    client = s3.boto3(direct=False)
    s3.delay = 0.02
    s3.reset_log()
    try:
        s3.fail_next = 1
        assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"z" * 10
    finally:
        s3.delay = 0.0
        s3.fail_next = 0
    got = s3.requests
    assert [r.method for r in got] == ["GET", "GET"]  # the 503, then boto3's retry
    assert all((h := r.held()) is not None and h >= 0.02 - EARLY for r in got), got
    assert s3.waves == 2

