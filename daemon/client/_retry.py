"""When a client call is tried again, and after how long: the one retry rule of every client.

No I/O here: the async and the sync client each drive a :class:`Attempts` with their own clock
sleep, so both retry exactly the same answers after exactly the same delays.

Rules (the contract):

1. **Only what the daemon refused before admission is retried.** The daemon has no idempotency
   key (a ``request_id`` is per connection, echoed and never remembered), so sending a request
   again means asking for a second decision, a second audit line. An answer is retried only
   when the daemon said that nothing was decided: ``BUSY`` (at capacity: *nothing was
   queued*, the evidence not read; over HTTP ``503``) and ``SHUTTING_DOWN`` (draining; the
   next attempt may reach another replica), checked before a single evidence byte is read
   (``docs/protocol.md`` §4, ``docs/http.md`` "Bounds before reads"). Such a refusal is
   audited as a refusal line, never as a decision, so a retry never makes two decisions of
   one pair. A batch's pairs refused ``BUSY`` are sent again alone; its decided pairs never.
2. **Never after the request may have been decided.** A connection that broke, or a deadline
   that passed, after the request left the client (:class:`TransportError`,
   :class:`ClientTimeout`), any other refusal (``REQUEST_TIMEOUT``, ``AUDIT_FAILED``,
   ``INTERNAL``, and every peer-fault code: do not resend unchanged) and a reply that breaks
   the protocol are raised at once: the daemon may have recorded a decision, and only its
   audit log can say. A proxy's own ``503`` (not the daemon's error document) is not a
   refusal the daemon documented, so it is not retried either.
3. **Bounded.** At most :attr:`Retry.attempts` attempts in all (the first included) within
   :attr:`Retry.total` seconds from the first; the delay before attempt *n + 1* is drawn
   uniformly from ``[0, min(max_delay, base_delay × 2^(n-1))]`` ("full jitter", so clients
   refused together do not return together), and is at least the answer's ``Retry-After``
   (HTTP; whole seconds or an HTTP date). A delay that would end past :attr:`Retry.total`
   is not slept: the refusal is raised instead.
4. ``Retry(attempts=1)`` (or ``retry=None`` where a client takes one) never retries.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Final, Generic, TypeVar

import attrs

from daemon.client._outcomes import ClientError, RejectedError, SubmitResult

__all__ = [
    "DEFAULT_RETRY",
    "RETRYABLE_CODES",
    "Attempts",
    "BatchProgress",
    "Retry",
    "parse_retry_after",
]

T = TypeVar("T")

#: The daemon's refusals made before admission, with nothing decided (rule 1).
RETRYABLE_CODES: Final = frozenset({"BUSY", "SHUTTING_DOWN"})


def _positive(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, not {value!r}")


@attrs.frozen
class Retry:
    """A retry policy (module rules 3, 4)."""

    attempts: int = attrs.field(default=5)
    base_delay: float = attrs.field(default=0.1, validator=_positive)
    max_delay: float = attrs.field(default=2.0, validator=_positive)
    total: float = attrs.field(default=10.0, validator=_positive)

    @attempts.validator
    def _check_attempts(self, _: attrs.Attribute[int], value: int) -> None:
        if type(value) is not int or value < 1:
            raise ValueError(f"attempts must be an integer >= 1, not {value!r}")

    def start(
        self,
        clock: Callable[[], float] = time.monotonic,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> Attempts:
        """The state of one call's attempts, its first one starting now."""
        return Attempts(self, clock, uniform)


#: What a client does when not told otherwise.
DEFAULT_RETRY: Final = Retry()


def retryable(error: object) -> bool:
    """Whether ``error`` is a refusal rule 1 retries."""
    return isinstance(error, RejectedError) and error.code in RETRYABLE_CODES


class Attempts:
    """One call's attempts (rules 1-3): :meth:`delay_after` says how long to wait before the
    next one, or ``None``: raise what the last one ended in."""

    def __init__(
        self,
        policy: Retry,
        clock: Callable[[], float],
        uniform: Callable[[float, float], float],
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._uniform = uniform
        self._deadline = clock() + policy.total
        #: Attempts made so far (the first is being made).
        self.made = 1
        #: The refusals retried, in order.
        self.retried: list[ClientError] = []

    def delay_after(self, error: BaseException) -> float | None:
        """Seconds to wait before attempting again after ``error``, or ``None`` (rules 1-3)."""
        policy = self._policy
        if not retryable(error) or self.made >= policy.attempts:
            return None
        assert isinstance(error, RejectedError)
        ceiling = min(policy.max_delay, policy.base_delay * 2 ** (self.made - 1))
        delay = self._uniform(0.0, ceiling)
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            delay = max(delay, retry_after)
        if self._clock() + delay > self._deadline:
            return None
        self.made += 1
        self.retried.append(error)
        return delay


class BatchProgress(Generic[T]):
    """A batch's pairs across its attempts (rule 1: the pairs refused ``BUSY`` go again, the
    decided ones never): :meth:`waiting` is what the next attempt sends, :meth:`record` takes
    its answers, in the same order, and returns the refusal to retry on (``None``: done)."""

    def __init__(self, pairs: Sequence[T]) -> None:
        self._pairs = pairs
        self._results: list[SubmitResult | RejectedError | None] = [None] * len(pairs)
        self._waiting = list(range(len(pairs)))
        #: Whether an attempt's answers were recorded (every pair then has an answer).
        self.recorded = False

    def waiting(self) -> list[T]:
        return [self._pairs[index] for index in self._waiting]

    def record(self, answers: Sequence[SubmitResult | RejectedError]) -> RejectedError | None:
        if len(answers) != len(self._waiting):
            raise ValueError("one answer per pair sent")
        for index, answer in zip(self._waiting, answers, strict=True):
            self._results[index] = answer
        self.recorded = True
        self._waiting = [index for index in self._waiting if retryable(self._results[index])]
        if not self._waiting:
            return None
        refused = self._results[self._waiting[0]]
        assert isinstance(refused, RejectedError)
        return refused

    def results(self) -> list[SubmitResult | RejectedError]:
        """Every pair's latest answer, in order (once :meth:`record` has been called)."""
        return [result for result in self._results if result is not None]


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or ``None``
    when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    from email.utils import parsedate_to_datetime  # an HTTP date: rare, loaded when met

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now())
