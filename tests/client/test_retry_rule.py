"""The retry rule (``daemon/client/_retry.py``) on its own: what is retried, after how long,
and when it stops. A fake clock and a fixed draw make every delay exact; no sleeping."""

from __future__ import annotations

import email.utils

import pytest

from daemon import ClientTimeout, RejectedError, Retry, ServiceUnavailable, TransportError
from daemon.client._outcomes import ServerProtocolError, SubmitResult, refusal_error
from daemon.client._retry import BatchProgress, parse_retry_after
from daemon.wire._protocol import ErrorResponse


def refusal(code: str, retry_after: float | None = None) -> RejectedError:
    error = refusal_error(ErrorResponse(1, code, "m", "id" if code != "BUSY" else None))
    error.retry_after = retry_after
    return error


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def highest(low: float, high: float) -> float:
    return high  # the top of the jitter range: the bound itself


@pytest.mark.parametrize("code", ["BUSY", "SHUTTING_DOWN"])
def test_refusals_made_before_admission_are_retried(code: str) -> None:
    attempts = Retry().start(Clock(), highest)
    assert attempts.delay_after(refusal(code)) == 0.1


@pytest.mark.parametrize(
    "error",
    [
        refusal("REQUEST_TIMEOUT"),  # the evidence was read: may be decided
        refusal("AUDIT_FAILED"),
        refusal("INTERNAL"),
        refusal("EVIDENCE_BYTES_EXCEEDED"),  # the peer's fault: resending changes nothing
        refusal("UNAUTHENTICATED"),
        TransportError("connection lost"),  # after the request was sent: may be decided
        ClientTimeout("no answer within 1 s"),
        ServerProtocolError("bad bytes"),
        ValueError("not a client error"),
    ],
    ids=repr,
)
def test_a_request_that_may_have_been_decided_is_never_retried(error: BaseException) -> None:
    attempts = Retry(attempts=100).start(Clock(), highest)
    assert attempts.delay_after(error) is None
    assert attempts.made == 1 and attempts.retried == []


def test_the_delays_double_up_to_the_cap_and_the_attempts_are_bounded() -> None:
    attempts = Retry(attempts=6, base_delay=0.1, max_delay=0.5, total=100).start(Clock(), highest)
    delays = [attempts.delay_after(refusal("BUSY")) for _ in range(6)]
    assert delays == [0.1, 0.2, 0.4, 0.5, 0.5, None]  # 6 attempts in all: 5 waits
    assert attempts.made == 6 and len(attempts.retried) == 5


def test_the_jitter_is_drawn_from_zero_to_the_bound() -> None:
    drawn: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return (low + high) / 2

    attempts = Retry().start(Clock(), uniform)
    assert attempts.delay_after(refusal("BUSY")) == 0.05
    assert drawn == [(0.0, 0.1)]


def test_retry_after_is_honoured_as_the_least_delay() -> None:
    attempts = Retry(total=100).start(Clock(), highest)
    assert attempts.delay_after(refusal("BUSY", retry_after=1.0)) == 1.0


def test_a_delay_past_the_total_is_not_slept() -> None:
    clock = Clock()
    attempts = Retry(attempts=100, total=2.0).start(clock, highest)
    assert attempts.delay_after(refusal("BUSY", retry_after=1.0)) == 1.0
    clock.now += 1.5
    assert attempts.delay_after(refusal("BUSY", retry_after=1.0)) is None  # would end at 2.5


def test_one_attempt_never_retries() -> None:
    assert Retry(attempts=1).start(Clock(), highest).delay_after(refusal("BUSY")) is None


@pytest.mark.parametrize(
    "keywords", [{"attempts": 0}, {"attempts": True}, {"base_delay": -1}, {"total": float("nan")}]
)
def test_a_policy_out_of_range_is_refused(keywords: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Retry(**keywords)  # type: ignore[arg-type]


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after(" 30 ") == 30.0
    later = email.utils.formatdate(1_000_010.0, usegmt=True)
    assert parse_retry_after(later, now=lambda: 1_000_000.0) == 10.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("-1") is None


def test_a_batch_sends_again_only_its_busy_pairs() -> None:
    decided = SubmitResult("d", "s", {"outcome": "PASS"})
    busy, refused = refusal("BUSY"), refusal("BINDING_INVALID")
    progress = BatchProgress(["a", "b", "c", "d"])
    assert progress.waiting() == ["a", "b", "c", "d"]
    assert progress.record([decided, busy, refused, busy]) is busy
    assert progress.waiting() == ["b", "d"]  # never a decided pair, nor a peer-fault refusal
    assert progress.record([decided, decided]) is None
    assert progress.results() == [decided, decided, refused, decided]
    with pytest.raises(ValueError):
        progress.record([decided])


def test_a_service_refusal_is_service_unavailable_and_keeps_its_retry_after() -> None:
    error = refusal("BUSY", retry_after=1.0)
    assert isinstance(error, ServiceUnavailable) and error.retry_after == 1.0
