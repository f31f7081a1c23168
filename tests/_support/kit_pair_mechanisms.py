"""Test-only pair mechanisms for the conformance kit: one sound, three broken where the old kit
never looked.

``PAIR`` decides a (message, statement) pair: the statement is ASCII ``<algorithm>:<hex>\\n``
naming the message's digest. Options (``[sessions.<name>.options.<provider>]``):
``max_message_bytes`` (lower-only, 65,536) and ``algorithms`` (a ``tuple[str, ...]``, default
``("sha256", "sha512")``: the statement's algorithm must be one of them, else UNKNOWN). The
host's algorithms are announced and pinned as the ``algorithms`` parameter. It states
``accepted_bounds`` ``EvidenceBounds(2, max_message_bytes + 256)``, uses the per-item size
step (a large message, a small statement), declares two option sets (a lowered limit; sha512
only, under which the sha256 samples are UNKNOWN) and grows its samples honestly
(``conformance_scaled``: a bound-sized message with its own statement).

Each broken provider differs in exactly one behaviour, and the old kit passed each:

* ``SLOW_AT_BOUND``: verifying a message of more than half the bound sleeps ``SLOW_SECONDS``
  (its real worst case; random bytes at the bound are refused fast, unparsed);
* ``CRASH_ON_MALFORMED``: decoding a statement that is not ASCII raises (only a well-hashed
  malformed statement reaches it: a broken hash is refused first);
* ``WRONG_UNDER_OPTIONS``: checks the statement's algorithm against the *default* algorithms,
  not the host's, so under "sha512 only" a sha256 statement PASSes.

Targets: ``kit_pair_mechanisms:PAIR`` and so on (``tests/_support`` is on the test path).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from session import (
    BoundProposition,
    ConformanceOptionSet,
    ConformanceSample,
    EvidenceBounds,
    MechanismDecision,
    MechanismOutcome,
    MechanismProvider,
    PairPrecheck,
    PairState,
    SourceIdentity,
    VerificationMechanism,
    lower_only,
)
from session import precheck as steps
from session.canon import digest_bytes

MECHANISM_ID: Final = "test.kit.pair.0.1"
EXPECTED: Final = "STATED"
MAX_MESSAGE_BYTES: Final = 65_536
MAX_STATEMENT_BYTES: Final = 256
DEFAULT_ALGORITHMS: Final = ("sha256", "sha512")
SLOW_SECONDS: Final = 0.3
_DIGEST: Final = SourceIdentity.read("kit-pair-1", (("kit_pair_mechanisms.py", __file__),)).digest
_U, _F, _P = MechanismOutcome.UNKNOWN, MechanismOutcome.FAIL, MechanismOutcome.PASS


def statement_of(message: bytes, algorithm: str = "sha256") -> bytes:
    return f"{algorithm}:{hashlib.new(algorithm, message).hexdigest()}\n".encode("ascii")


@attrs.frozen
class PairOptions:
    max_message_bytes: int = MAX_MESSAGE_BYTES
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS


class PairMechanism:
    mechanism_id = MECHANISM_ID
    mechanism_digest = _DIGEST

    def __init__(self, options: PairOptions) -> None:
        self.max_message_bytes = lower_only(
            "max_message_bytes", options.max_message_bytes, MAX_MESSAGE_BYTES
        )
        if not options.algorithms or not set(options.algorithms) <= set(DEFAULT_ALGORITHMS):
            raise ValueError(f"algorithms must be some of {list(DEFAULT_ALGORITHMS)}")
        self.algorithms = tuple(options.algorithms)
        self.accepted_bounds = EvidenceBounds(2, self.max_message_bytes + MAX_STATEMENT_BYTES)
        self.precheck = PairPrecheck(
            (
                steps.binding_type("BINDING"),
                steps.implementation("IMPLEMENTATION", MECHANISM_ID, _DIGEST),
                steps.predicate("PREDICATE", MECHANISM_ID, EXPECTED),
                steps.parameters(
                    "PARAMETERS",
                    ("algorithms",),
                    lambda copied: copied["algorithms"] == ",".join(self.algorithms),
                ),
                steps.pair_references("REFERENCES"),
                steps.subject_is_first("SUBJECT"),
                steps.pair_bounds("BOUNDS", self.accepted_bounds.max_evidence_bytes),
                steps.evidence_pair("EVIDENCE"),
                steps.evidence_bytes("EVIDENCE_TYPE"),
                steps.evidence_sizes("LIMIT", (self.max_message_bytes, MAX_STATEMENT_BYTES)),
                steps.evidence_rehash("REHASH"),
            )
        )

    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        try:
            return self._evaluate(binding, evidence)
        except Exception:
            return MechanismDecision(_U, "EXECUTION", {})

    def _evaluate(self, binding: object, evidence: object) -> MechanismDecision:
        admitted = self.precheck.run(binding, evidence)
        if not isinstance(admitted, PairState):
            return MechanismDecision(admitted.outcome, admitted.code, {})
        message, statement = admitted.items
        text = self._decode(statement)
        if text is None:
            return MechanismDecision(_U, "STATEMENT_UNREADABLE", {})
        algorithm, colon, value = text.rstrip("\n").partition(":")
        if not colon or algorithm not in self._allowed():
            return MechanismDecision(_U, "ALGORITHM_UNSUPPORTED", {})
        observed = self._digest(algorithm, message)
        if observed != value:
            return MechanismDecision(_F, "MISMATCH", {"observed": observed})
        return MechanismDecision(_P, "", {"observed": observed})

    def _decode(self, statement: bytes) -> str | None:
        try:
            return statement.decode("ascii")
        except UnicodeDecodeError:
            return None

    def _allowed(self) -> tuple[str, ...]:
        return self.algorithms

    def _digest(self, algorithm: str, message: bytes) -> str:
        return hashlib.new(algorithm, message).hexdigest()


class SlowAtBound(PairMechanism):
    def _digest(self, algorithm: str, message: bytes) -> str:
        if len(message) > self.accepted_bounds.max_evidence_bytes // 2:
            time.sleep(SLOW_SECONDS)  # stands for a verification that does not scale
        return super()._digest(algorithm, message)


class CrashOnMalformed(PairMechanism):
    def evaluate(self, binding: BoundProposition, evidence: Sequence[bytes]) -> MechanismDecision:
        return self._evaluate(binding, evidence)  # no catch-all: a parser error escapes

    def _decode(self, statement: bytes) -> str | None:
        return statement.decode("ascii")


class WrongUnderOptions(PairMechanism):
    def _allowed(self) -> tuple[str, ...]:
        return DEFAULT_ALGORITHMS  # the defaults, not the host's configuration


class PairProvider(MechanismProvider[PairOptions]):
    mechanism_id = MECHANISM_ID
    options_type = PairOptions
    mechanism_type: type[PairMechanism] = PairMechanism

    def create(self, options: PairOptions) -> PairMechanism:
        return self.mechanism_type(options)

    def honest_binding(self, evidence: Sequence[bytes], options: PairOptions) -> BoundProposition:
        if len(evidence) != 2:
            raise ValueError("MESSAGE STATEMENT (two files)")
        message, statement = (digest_bytes(item) for item in evidence)
        return BoundProposition(
            subject_id=message,
            predicate=MECHANISM_ID,
            expected=EXPECTED,
            mechanism_id=MECHANISM_ID,
            mechanism_digest=_DIGEST,
            evidence_refs=(message, statement),
            trust_roots=(statement,),
            bounds=EvidenceBounds(2, options.max_message_bytes + MAX_STATEMENT_BYTES),
            parameters={"algorithms": ",".join(options.algorithms)},
        )

    def announce(self, mechanism: VerificationMechanism) -> Mapping[str, str]:
        algorithms = getattr(mechanism, "algorithms", DEFAULT_ALGORITHMS)
        return {"algorithms": ",".join(algorithms)}

    def pin(self, binding: BoundProposition, announced: Mapping[str, str]) -> BoundProposition:
        if "algorithms" not in announced:
            return binding
        return attrs.evolve(
            binding, parameters={**binding.parameters, "algorithms": announced["algorithms"]}
        )

    def conformance_samples(self) -> Sequence[ConformanceSample]:
        message = b"a message the statement vouches for\n"
        return (
            ConformanceSample("sha256", (message, statement_of(message)), _P),
            ConformanceSample("sha512", (message, statement_of(message, "sha512")), _P),
            ConformanceSample("changed", (message + b"!", statement_of(message)), _F),
        )

    def conformance_scaled(
        self, sample: ConformanceSample, bounds: EvidenceBounds
    ) -> ConformanceSample | None:
        if sample.name == "changed":
            return None  # the kit's own growth
        algorithm = sample.evidence[1].split(b":")[0].decode("ascii")
        size = bounds.max_evidence_bytes - MAX_STATEMENT_BYTES  # the largest message accepted
        message = (sample.evidence[0] * (size // len(sample.evidence[0]) + 1))[:size]
        return ConformanceSample(
            sample.name, (message, statement_of(message, algorithm)), sample.expected
        )

    def conformance_option_sets(self) -> Sequence[ConformanceOptionSet]:
        return (
            ConformanceOptionSet("lowered", {"max_message_bytes": 4096}),
            ConformanceOptionSet(
                "sha512 only", {"algorithms": ["sha512"]}, {"sha256": _U, "changed": _U}
            ),
        )


def _provider(mechanism: type[PairMechanism], **attributes: Any) -> PairProvider:
    provider_type = type(
        f"{mechanism.__name__}Provider",
        (PairProvider,),
        {"mechanism_type": mechanism, **attributes},
    )
    provider: PairProvider = provider_type()
    return provider


PAIR: Final = _provider(PairMechanism)
SLOW_AT_BOUND: Final = _provider(SlowAtBound)
CRASH_ON_MALFORMED: Final = _provider(CrashOnMalformed)
WRONG_UNDER_OPTIONS: Final = _provider(WrongUnderOptions)


class _RaisedLimit(PairProvider):
    def conformance_option_sets(self) -> Sequence[ConformanceOptionSet]:
        return (ConformanceOptionSet("raised", {"max_message_bytes": MAX_MESSAGE_BYTES + 1}),)


#: Declares an option set its own constructor refuses (a raised lower-only limit).
RAISED_LIMIT: Final = _RaisedLimit()
