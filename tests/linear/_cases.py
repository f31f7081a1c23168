"""Adversarial inputs for every parser of untrusted bytes, shared by the growth tests and
``benchmarks/bench_adversarial.py``.

A :class:`Case` names a parser and an attack, builds the attack's input at a requested size
(``build(n)`` returns about ``n`` bytes) and feeds it to the parser through the parser's public
entry point (``run(data)``). ``run`` swallows exactly the refusals the parser documents; any
other exception escapes and fails the test that called it.

Sizes: ``small`` and ``large`` with ``large == 16 * small``. Parsers with a byte cap below
256 KiB are measured inside their cap (so the growth is measured on bytes the parser really
reads, not on an early size refusal).
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Callable
from typing import Any, Final

import attrs

KIB: Final = 1024
SMALL: Final = 16 * KIB
LARGE: Final = 256 * KIB
_SLOW: Final = (4 * KIB, 64 * KIB)
_SLOWER: Final = (2 * KIB, 32 * KIB)
_SLOWEST: Final = (1 * KIB, 16 * KIB)


@attrs.frozen
class Case:
    parser: str
    attack: str
    build: Callable[[int], bytes]
    run: Callable[[bytes], object]
    small: int = SMALL
    large: int = LARGE
    #: ``variant(size, n)``: the same attack with other content (e.g. other key names), for
    #: parsers with caches keyed by content (orjson caches object keys across calls).
    variant: Callable[[int, int], bytes] | None = None
    #: False: measured by the benchmark only (see ``TINY_ELEMENT_ATTACKS``).
    growth: bool = True

    @property
    def name(self) -> str:
        return f"{self.parser}: {self.attack}"

    def data(self, size: int) -> bytes:
        return _cached_build(self.build, size)

    def variants(self, size: int, count: int) -> list[bytes]:
        """``count`` distinct inputs of the attack at ``size`` (distinct objects at least)."""
        if self.variant is None:
            data = self.data(size)
            return [data[:-1] + data[-1:] for _ in range(count)]
        return [_cached_variant(self.variant, size, index) for index in range(count)]


@functools.lru_cache(maxsize=256)
def _cached_build(build: Callable[[int], bytes], size: int) -> bytes:
    return build(size)


@functools.lru_cache(maxsize=1024)
def _cached_variant(variant: Callable[[int, int], bytes], size: int, index: int) -> bytes:
    return variant(size, index)


def forget_inputs() -> None:
    """Drop the cached inputs (the growth test measures each case on a heap without them)."""
    _cached_build.cache_clear()
    _cached_variant.cache_clear()


def _repeat(unit: bytes, size: int, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    count = max(1, (size - len(prefix) - len(suffix)) // len(unit))
    return prefix + unit * count + suffix


# --------------------------------------------------------------------------- JSON-ish attacks


def unterminated_escaped_quotes(size: int) -> bytes:
    """``"a\\"a\\"…`` with no closing quote: the backtracking trap of a string-token regex."""
    return _repeat(b'a\\"', size, prefix=b'"')


def unterminated_in_array(size: int) -> bytes:
    return _repeat(b'\\"', size, prefix=b'["x",{"k":"')


def escape_run(size: int) -> bytes:
    """One string of escaped backslashes (canonical escapes: the slow reference path)."""
    return _repeat(b"\\\\", size, prefix=b'["', suffix=b'"]')


def unicode_escape_run(size: int) -> bytes:
    return _repeat(b"\\u0061", size, prefix=b'["', suffix=b'"]')


def surrogate_escape_run(size: int) -> bytes:
    return _repeat(b"\\ud800", size, prefix=b'["', suffix=b'"]')


def deep_brackets(size: int) -> bytes:
    return b"[" * size


def deep_objects(size: int) -> bytes:
    return _repeat(b'{"a":', size)


def closing_brackets(size: int) -> bytes:
    return b"]" * size


def many_containers(size: int) -> bytes:
    """Arrays of one 32-character string (about 7,000 at 256 KiB)."""
    return _repeat(b'["abcdefghijklmnopqrstuvwxyz012345"],', size, prefix=b"[", suffix=b"[]]")


def many_empty_containers(size: int) -> bytes:
    return _repeat(b"[],", size, prefix=b"[", suffix=b"[]]")


def many_keys(size: int, variant: int = 0) -> bytes:
    """An object of 64-character keys (about 3,800 at 256 KiB)."""
    count = max(1, size // 69)
    prefix = "key_" + chr(ord("a") + variant % 26)
    keys = {f"{prefix}{index:059d}": 0 for index in range(count)}
    return json.dumps(keys, separators=(",", ":")).encode()


def many_short_keys(size: int, variant: int = 0) -> bytes:
    """An object of 9-character keys (about 18,700 at 256 KiB)."""
    count = max(1, size // 14)
    prefix = "k" + chr(ord("a") + variant % 26)
    keys = {f"{prefix}{index:07d}": 0 for index in range(count)}
    return json.dumps(keys, separators=(",", ":")).encode()


def many_strings(size: int) -> bytes:
    """Strings holding an escape each (so canonical admission takes its reference path)."""
    return _repeat(b'"abcdefghijklmn\\",', size, prefix=b"[", suffix=b'""]')


def many_tiny_strings(size: int) -> bytes:
    return _repeat(b'"\\",', size, prefix=b"[", suffix=b'""]')


def long_digits(size: int) -> bytes:
    return _repeat(b"9", size, prefix=b"[", suffix=b"]")


def long_fraction(size: int) -> bytes:
    digits = max(1, size - 8)
    return b"[1." + b"1" * digits + b"e-1]"


def long_key(size: int) -> bytes:
    return _repeat(b"a", size, prefix=b'{"', suffix=b'":0}')


def combining_marks(size: int) -> bytes:
    """One string: ``x`` then U+0301 repeated (NFC quick check says MAYBE: full check)."""
    return _repeat("\u0301".encode(), size, prefix=b'["x', suffix=b'"]')


def composing_marks(size: int) -> bytes:
    """``e`` + U+0301 repeated: composes, so the text is not NFC (refused after the check)."""
    return _repeat("e\u0301".encode(), size, prefix=b'["', suffix=b'"]')


def unordered_marks(size: int) -> bytes:
    return _repeat("\u0301\u0323".encode(), size, prefix=b'["x', suffix=b'"]')


def many_numbers(size: int) -> bytes:
    return _repeat(b"1234567890123,", size, prefix=b"[", suffix=b"0]")


#: Attacks every JSON parser is measured against (growth test and benchmark).
JSON_ATTACKS: Final[dict[str, Callable[[int], bytes]]] = {
    "unterminated string of escaped quotes": unterminated_escaped_quotes,
    "long escape run": escape_run,
    "deep brackets": deep_brackets,
    "many containers": many_containers,
    "many keys": many_keys,
    "long digit run": long_digits,
    "composing marks": composing_marks,
}
#: More attacks for the canonical codec, the most exposed parser (growth test and benchmark).
CANONICAL_ATTACKS: Final[dict[str, Callable[[int], bytes]]] = {
    "unterminated string in a container": unterminated_in_array,
    "many escaped strings": many_strings,
    "many numbers": many_numbers,
    "long unicode-escape run": unicode_escape_run,
    "long key": long_key,
    "combining marks": combining_marks,
    "out-of-order marks": unordered_marks,
    "deep objects": deep_objects,
    "closing brackets": closing_brackets,
    "long fraction": long_fraction,
}
#: Benchmark only: tiny elements. Their growth from 16 KiB to 256 KiB includes a constant
#: memory-hierarchy penalty (tens of thousands of objects or dict entries outgrow the CPU's
#: L2 cache, and fresh allocator arenas are page-faulted in): about 1.5-2x per element on a
#: loaded 2-core machine, which is not algorithmic growth. The growth test exposes the same
#: per-element code with elements of 32+ bytes (still thousands of them: a per-element scan
#: would show 256x); the benchmark reports these worst figures.
TINY_ELEMENT_ATTACKS: Final[dict[str, Callable[[int], bytes]]] = {
    "many empty containers": many_empty_containers,
    "many short keys": many_short_keys,
    "many one-character strings": many_tiny_strings,
}
JSON_VARIANTS: Final[dict[str, Callable[[int, int], bytes]]] = {
    "many keys": many_keys,
    "many short keys": many_short_keys,
}


def _json_cases(
    parser: str,
    run: Callable[[bytes], object],
    *,
    small: int = SMALL,
    large: int = LARGE,
    only: tuple[str, ...] | None = None,
    canonical: bool = False,
) -> list[Case]:
    attacks = {**JSON_ATTACKS, **(CANONICAL_ATTACKS if canonical else {})}
    cases = [
        Case(parser, attack, build, run, small, large, JSON_VARIANTS.get(attack))
        for attack, build in attacks.items()
        if only is None or attack in only
    ]
    if only is None:
        cases += [
            Case(parser, attack, build, run, small, large, JSON_VARIANTS.get(attack), False)
            for attack, build in TINY_ELEMENT_ATTACKS.items()
        ]
    return cases


def _refusing(*errors: type[BaseException]) -> Callable[[Callable[[bytes], object]], Any]:
    """Wrap ``call`` so that exactly the documented refusals are swallowed."""

    def wrap(call: Callable[[bytes], object]) -> Callable[[bytes], object]:
        @functools.wraps(call)
        def run(data: bytes) -> object:
            try:
                return call(data)
            except errors:
                return None

        return run

    return wrap


# --------------------------------------------------------------------------- mechanism


def _canonical_cases() -> list[Case]:
    from mechanism.canonical import CanonicalError, admit_canonical

    @_refusing(CanonicalError)
    def admit(data: bytes) -> object:
        return admit_canonical(data, max_bytes=LARGE)

    return _json_cases("canonical.admit_canonical", admit, canonical=True)


def _formation_cases() -> list[Case]:
    from mechanism.formation import check_formation
    from mechanism.formation._wire import FormationError, admit_certificate, admit_subject

    @_refusing(FormationError)
    def subject(data: bytes) -> object:
        return admit_subject(data)

    @_refusing(FormationError)
    def certificate(data: bytes) -> object:
        return admit_certificate(data)

    def check(data: bytes) -> object:
        subject_bytes, _, certificate_bytes = data.partition(b"\n")
        return check_formation(subject_bytes, certificate_bytes)

    only = ("unterminated string of escaped quotes", "composing marks")
    return [
        *_json_cases("formation.admit_subject", subject, only=only),
        Case("formation.admit_subject", "many nodes", _many_nodes_subject, subject),
        *_json_cases("formation.admit_certificate", certificate, only=only[:1]),
        Case("formation.check_formation", "compose chains", _compose_chain_pair, check),
    ]


def _formation_nodes(count: int) -> list[dict[str, Any]]:
    """Blocks of ATOM, APPLY, APPLY_STEP, ID, COMPOSE (a path of one step, composed)."""
    atom = {
        "tag": "ATOM",
        "payload_digest": "sha256:" + "ab" * 32,
    }
    nodes: list[dict[str, Any]] = []
    while len(nodes) + 5 <= count:
        base = len(nodes)
        nodes += [
            atom,
            {"tag": "APPLY", "argument": base},
            {"tag": "APPLY_STEP", "source": base, "target": base + 1},
            {"tag": "ID", "at": base},
            {"tag": "COMPOSE", "left": base + 3, "right": base + 2},
        ]
    return nodes or [atom]


def _subject_bytes(nodes: list[dict[str, Any]]) -> bytes:
    from mechanism.canonical import canonical_bytes

    return canonical_bytes(
        {
            "schema_version": "VSTD-TYPED-FORMATION-0.1",
            "profile_digest": (
                "sha256:271760d604e1ade55cba4974c658b92263bd3ee8ae343677dd91d0e713fb677f"
            ),
            "context": {
                "ground_artifact_digest": "sha256:" + "cd" * 32,
                "authority_axiom_agency_digest": "sha256:" + "ef" * 32,
            },
            "nodes": nodes,
            "root": len(nodes) - 1,
        }
    )


def _many_nodes_subject(size: int) -> bytes:
    # About 50 bytes per node; past 1,024 nodes admission stops with LIMIT after parsing.
    return _subject_bytes(_formation_nodes(max(5, size // 53)))


def _compose_chain_pair(size: int) -> bytes:
    from mechanism.formation._producer import produce_formation_certificate

    # Subject plus certificate of about ``size`` bytes together (both below the node bound).
    count = min(1020, max(5, size // 110))
    subject = _subject_bytes(_formation_nodes(count))
    return subject + b"\n" + produce_formation_certificate(subject)


def _silo_cases() -> list[Case]:
    from mechanism.formation import inspect_silo_formation

    def inspect(data: bytes) -> object:
        return inspect_silo_formation(
            data,
            {},
            subject_path="s.json",
            certificate_path="c.json",
            profile_path="p.json",
            ground_path="g.bin",
        )

    only = ("unterminated string of escaped quotes",)
    return [
        *_json_cases("silo.inspect_silo_formation", inspect, only=only),
        Case("silo.inspect_silo_formation", "long commit lists", _long_commit, inspect, *_SLOW),
    ]


def _long_commit(size: int) -> bytes:
    """A commit whose derivations and obligations fill ``size`` bytes (all validated)."""
    from mechanism.canonical import canonical_bytes

    census = [
        {
            "path": name,
            "necessity": "NECESSARY",
            "object": {
                "schema_version": "VSTD-OBJECT-0.1",
                "object_digest": "sha256:" + f"{index:02x}" * 32,
                "size_bytes": 1,
                "media_type": "application/json",
                "artifact_kind": "kind",
                "declared_schema_id": "schema",
            },
        }
        for index, name in enumerate(("c.json", "g.bin", "p.json", "s.json"))
    ]
    count = max(1, size // 90)
    commit = {
        "schema_version": "VSTD-SILO-COMMIT-0.1",
        "publisher_id": "publisher:sha256:" + "0" * 64,
        "parents": [],
        "census": census,
        "ground_paths": ["g.bin"],
        "derivations": [
            {"target_path": "s.json", "source_paths": ["g.bin", "p.json"]} for _ in range(count)
        ],
        "relations": [],
        "residual_obligations": [f"obligation {index:08d}" for index in range(count)],
        "exclusions": [],
        "completeness_kind": "SILO_CENSUS",
        "coverage_universe": [],
        "authority_axiom_agency": [],
        "authority_axiom_agency_version": "VSTD-AUTHORITY-AXIOM-AGENCY-0.1",
        "authority_axiom_agency_digest": "sha256:" + "1" * 64,
        "authority_model_path": None,
        "self_derivation_record": {
            "subject_path": "s.json",
            "ground_paths": ["g.bin"],
            "mechanism_path": "c.json",
            "retained_path": ["g.bin", "s.json"],
            "relation_strength": "strong",
            "ground_self": False,
            "derivation_reflexivity": False,
            "reflexion_identity": False,
            "deriver_cycle_closed": False,
            "ground_self_evidence_path": None,
            "derivation_reflexivity_evidence_path": None,
            "reflexion_identity_evidence_path": None,
            "deriver_cycle_closure_evidence_path": None,
            "residual_obligations": [],
        },
        "created_at": "2024-01-01T00:00:00Z",
    }
    return canonical_bytes(commit)


def _receipt_cases() -> list[Case]:
    from mechanism.formation import FormationReceiptError, recheck_formation_receipt

    @_refusing(FormationReceiptError)
    def recheck(data: bytes) -> object:
        return recheck_formation_receipt(data, b"", b"", {})

    only = ("unterminated string of escaped quotes", "many keys")
    return _json_cases("receipt.recheck_formation_receipt", recheck, only=only)


def _descriptor_cases() -> list[Case]:
    from mechanism.descriptor._authorization import AllowlistError, parse_allowlist
    from mechanism.descriptor._axion import PolicyError, parse_policy
    from mechanism.descriptor._codec import DescriptorError, decode_descriptor
    from mechanism.descriptor._tisc import TiscError, decode_program
    from mechanism.descriptor._weights import inspect_weights

    @_refusing(DescriptorError)
    def descriptor(data: bytes) -> object:
        return decode_descriptor(data)

    @_refusing(PolicyError)
    def policy(data: bytes) -> object:
        return parse_policy(data)

    @_refusing(TiscError)
    def tisc(data: bytes) -> object:
        return decode_program(data)

    @_refusing(AllowlistError)
    def allowlist(data: bytes) -> object:
        return parse_allowlist(data)

    def weights(data: bytes) -> object:
        return inspect_weights(data)

    small, large = 4 * KIB, 64 * KIB
    cases = [
        Case("descriptor.decode_descriptor", "one long line", _one_long_line, descriptor, 256),
        Case("descriptor.decode_descriptor", "many lines", _many_lines, descriptor, 256),
        Case("descriptor.decode_descriptor", "oversize", _one_long_line, descriptor, 16 * KIB),
    ]
    cases = [attrs.evolve(case, small=case.small, large=case.small * 16) for case in cases]
    cases += [
        Case("axion.parse_policy", attack, build, policy, small, large)
        for attack, build in {
            "unterminated string of escaped quotes": _policy_unterminated,
            "long escape run": _policy_escapes,
            "long digit run": _policy_digits,
            "long symbol then a quote": _policy_symbol,
            "many clauses": _policy_clauses,
            "deep brackets": lambda size: b"(" * size,
            "many final-authorization entries": _policy_authorizations,
        }.items()
    ]
    cases += [
        Case("tisc.decode_program", attack, build, tisc, small, large)
        for attack, build in {
            "one long word": lambda size: _repeat("λ".encode(), size, b"@code\n", b"\n"),
            "many words": _tisc_words,
            "long whitespace line": lambda size: _repeat(b" ", size, b"@code\n", b"\n"),
        }.items()
    ]
    cases += [
        Case("descriptor.parse_allowlist", attack, build, allowlist, small, large)
        for attack, build in {
            "many distinct entries": _allowlist_entries,
            "deep brackets": deep_brackets,
            "long escape run": escape_run,
            "unterminated string of escaped quotes": unterminated_escaped_quotes,
        }.items()
    ]
    cases += [
        Case("weights.inspect_weights", attack, build, weights, KIB, 16 * KIB)
        for attack, build in {
            "deep header": lambda size: _safetensors(b"[" * size),
            "long digit shape": _weights_digits,
            "huge shape product": _weights_huge_shape,
            "many tensors": _weights_tensors,
            "long metadata escapes": _weights_metadata,
            "unterminated header string": lambda size: _safetensors(
                unterminated_escaped_quotes(size)
            ),
        }.items()
    ]
    return cases


def _one_long_line(size: int) -> bytes:
    return b"a" * (size - 1) + b"\n"


def _many_lines(size: int) -> bytes:
    return _repeat(b"a\n", size)


def _policy_unterminated(size: int) -> bytes:
    return _repeat(b'\\"', size, prefix=b'(policy (require-alignment (reason "')


def _policy_escapes(size: int) -> bytes:
    return _repeat(b"\\\\", size, prefix=b'(policy (require-alignment (reason "', suffix=b'")))')


def _policy_digits(size: int) -> bytes:
    return _repeat(b"1", size, prefix=b"(policy (tier ", suffix=b"x))")


def _policy_symbol(size: int) -> bytes:
    return _repeat(b"a", size, prefix=b"(policy (tier ", suffix=b'"))')


def _policy_clauses(size: int) -> bytes:
    return _repeat(b'(require-alignment (reason "r"))', size, prefix=b"(policy ", suffix=b")")


def _policy_authorizations(size: int) -> bytes:
    entry = b'(final-authorization (operation run) (payload "' + b"a" * 64 + b'"))'
    return _repeat(entry, size, prefix=b"(policy ", suffix=b")")


def _tisc_words(size: int) -> bytes:
    # Valid 24-glyph words past the instruction cap: refused when the cap is reached.
    return _repeat(b"e" * 24 + b"\n", size, prefix=b"@code\n")


def _allowlist_entries(size: int) -> bytes:
    count = max(1, (size - 80) // 126)
    entries = [
        {"provider": "t81vm", "operation": "run", "payload_reference": f"{index:064x}"}
        for index in range(count)
    ]
    document = {"schema_version": "t81.descriptor-allowlist.v1", "entries": entries}
    return json.dumps(document, separators=(",", ":")).encode()


def _safetensors(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def _weights_digits(size: int) -> bytes:
    digits = b"1" * max(1, min(4000, size - 80))
    header = b'{"t":{"dtype":"I8","shape":[' + digits + b'],"data_offsets":[0,0]}}'
    return _safetensors(header)


def _weights_huge_shape(size: int) -> bytes:
    # Eight dimensions of up to 2,000 digits each: their product has up to 16,000 digits.
    digits = b"9" * max(1, min(2000, (size - 80) // 8))
    shape = b",".join([digits] * 8)
    header = b'{"t":{"dtype":"I8","shape":[' + shape + b'],"data_offsets":[0,1]}}'
    return _safetensors(header, b"\x00")


def _weights_tensors(size: int) -> bytes:
    # Every tensor claims the same byte: each entry is checked, then the tiling check refuses
    # the header (past 64 entries the count check does), so no snapshot is ever written.
    count = max(1, size // 64)
    header = json.dumps(
        {f"t{index:06d}": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]}
         for index in range(count)},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    return _safetensors(header, b"\x00")


def _weights_metadata(size: int) -> bytes:
    # No tensor covers the one data byte: refused after the whole header is checked.
    header = _repeat(b"\\\\", size, prefix=b'{"__metadata__":{"m":"', suffix=b'"}}')
    return _safetensors(header, b"\x00")


# --------------------------------------------------------------------------- holdout


def _holdout_cases() -> list[Case]:
    from mechanism.holdout._reader import StrictReadError, read_json

    @_refusing(StrictReadError)
    def read(data: bytes) -> object:
        return read_json(data)

    return [
        *_json_cases("holdout.read_json", read),
        Case("holdout.read_json", "lone surrogate escapes", surrogate_escape_run, read),
        Case("holdout.corpus_index", "many cases", _corpus_index, _corpus),
        Case("holdout.read_json", "many duplicate members", _duplicate_members, read),
        *_scorer_cases(),
    ]


def _corpus_index(size: int) -> bytes:
    cases = [
        {
            "name": f"case-{index:08d}",
            "mechanism": "formation",
            "artifact": f"root-{2 * index:064x}",
            "leaf": f"root-{2 * index + 1:064x}",
        }
        for index in range(max(1, size // 190))
    ]
    return json.dumps({"type": "EVIDENCED-HOLDOUT-CORPUS-v1", "cases": cases}).encode()


def _corpus(data: bytes) -> object:
    from pathlib import Path

    from mechanism.holdout._corpus import Corpus

    return Corpus.from_index(Path("."), data)


def _duplicate_members(size: int) -> bytes:
    return _repeat(b'{"a":0,"a":0},', size, prefix=b"[", suffix=b"0]")


def _scorer_cases() -> list[Case]:
    """Observation documents that pass the strict reader and reach the schema (the challenge
    is valid, so the document is what is judged)."""
    from mechanism.holdout import score_bytes
    from mechanism.holdout._commitment import project_schemas

    schemas = project_schemas()
    release = "srel-" + "b" * 64
    root = "root-" + "a" * 64
    challenges = [
        {
            "id": "S1",
            "name": "n",
            "fixture": {"artifact": "formation-identity", "root": root},
            "recipe": [{"op": "IDENTITY"}],
            "predicates": [{"op": "REFUSAL_SET_EQ", "value": []}],
        }
    ]

    def score(data: bytes) -> object:
        report = score_bytes(challenges, data, schemas=schemas, expect_release=release)
        assert report.refusal != "challenge-schema", report.detail
        return report

    def document(observations: dict[str, Any]) -> bytes:
        return json.dumps(
            {
                "type": "EVIDENCED-HOLDOUT-OBSERVATION-v1",
                "implementation": "evidenced-python",
                "spec_release_id": release,
                "observations": observations,
            },
            separators=(",", ":"),
        ).encode()

    def refusal_set(codes: list[Any]) -> bytes:
        return document({"S1": {"fixture_root": root, "refusal_set": codes}})

    def sorted_codes(size: int) -> bytes:
        return refusal_set([f"CODE_{index:010d}" for index in range(max(1, size // 18))])

    def unsorted_codes(size: int) -> bytes:
        count = max(1, size // 18)
        return refusal_set([f"CODE_{count - index:010d}" for index in range(count)])

    def many_observations(size: int) -> bytes:
        count = max(1, size // 110)
        return document({f"S{index}": {"fixture_root": root} for index in range(1, count + 1)})

    def distinct_objects(size: int) -> bytes:
        return refusal_set([{"a": index} for index in range(max(1, size // 8))])

    def strings_and_numbers(size: int) -> bytes:
        # Strings mixed with numbers cannot be sorted: jsonschema compared every pair.
        count = max(1, size // 12)
        return refusal_set([f"C{index:07d}" if index % 2 else index for index in range(count)])

    def duplicate_last(size: int) -> bytes:
        # Distinct unsortable items, then a repeat of the first: found only at the very end.
        codes: list[Any] = [[index, {}] for index in range(max(1, size // 9))]
        return refusal_set([*codes, codes[0]])

    def unexpected_members(size: int) -> bytes:
        names = {f"m{index:062d}": 0 for index in range(max(1, size // 68))}
        return document({"S1": {"fixture_root": root, **names}})

    def bad_observation_ids(size: int) -> bytes:
        count = max(1, size // 110)
        return document({f"X{index:063d}": {"fixture_root": root} for index in range(count)})

    # Sizes: jsonschema renders every error of a refused document (~16 us per failing item), so
    # refused documents are measured at 4 and 64 KiB, or 1 and 16 KiB for unsortable refusal
    # sets: still 2,000 items, where jsonschema's pairwise uniqueItems took 14 s (2,000 objects)
    # before the scorer's linear rule replaced it.
    return [
        Case("holdout.score_bytes", "long sorted refusal set", sorted_codes, score),
        Case("holdout.score_bytes", "many observations", many_observations, score),
        Case("holdout.score_bytes", "long unsorted refusal set", unsorted_codes, score, *_SLOW),
        Case(
            "holdout.score_bytes", "refusal set of distinct objects", distinct_objects, score,
            *_SLOWEST,
        ),
        Case(
            "holdout.score_bytes", "refusal set of strings and numbers", strings_and_numbers,
            score, *_SLOWEST,
        ),
        Case(
            "holdout.score_bytes", "unsortable refusal set repeating its first item",
            duplicate_last, score, *_SLOWEST,
        ),
        Case(
            "holdout.score_bytes", "many unexpected members", unexpected_members, score, *_SLOW
        ),
        Case("holdout.score_bytes", "many bad observation ids", bad_observation_ids, score, *_SLOW),
        Case(
            "holdout.Schemas.from_bytes", "type array of distinct objects", _schema_type_objects,
            _schemas_from_bytes, *_SLOWEST,
        ),
    ]  # fmt: skip


def _schema_type_objects(size: int) -> bytes:
    """A schema whose ``type`` is an array of objects: the meta-schema's ``uniqueItems``."""
    count = max(1, size // 8)
    return json.dumps({"type": [{"a": index} for index in range(count)]}).encode()


def _schemas_from_bytes(data: bytes) -> object:
    from mechanism.holdout import Refusal, Schemas
    from mechanism.holdout._scorer import _CHECKED

    _CHECKED.clear()  # schema checks are cached by content: measure the check, not the cache
    try:
        return Schemas.from_bytes(b"{}", data)
    except Refusal as refusal:
        assert refusal.code == "schemas-invalid", refusal
        return refusal


# --------------------------------------------------------------------------- daemon


def _daemon_cases() -> list[Case]:
    from daemon.config._config import ConfigError, parse_config
    from daemon.wire._protocol import ProtocolError, ServerConnection, decode_header, encode_frame

    @_refusing(ProtocolError)
    def header(data: bytes) -> object:
        return decode_header(data, max_bytes=LARGE)

    @_refusing(ConfigError)
    def config(data: bytes) -> object:
        from pathlib import Path

        return parse_config(data.decode("utf-8", "replace"), base=Path("."), source="<test>")

    hello = encode_frame({"client": "c", "kind": "hello", "versions": [1]})
    request = encode_frame({"kind": "list", "request_id": 1})

    def frames(size: int) -> bytes:
        return _repeat(request, size, prefix=hello)

    def stream(data: bytes) -> object:
        """Feed the frames in 64-byte pieces and drain every event (linear buffer handling)."""
        connection = ServerConnection(max_header_bytes=LARGE)
        events = 0
        for start in range(0, len(data), 64):
            connection.receive_data(data[start : start + 64])
            while type(connection.next_event()).__name__ not in ("NeedData", "Closed"):
                events += 1
        return events

    def toml(template: Callable[[int], bytes]) -> Callable[[int], bytes]:
        return template

    return [
        *_json_cases("protocol.decode_header", header),
        Case("protocol.ServerConnection", "many frames in small pieces", frames, stream, *_SLOW),
        *[
            Case("config.parse_config", attack, toml(build), config, *_SLOW)
            for attack, build in {
                "deep arrays": lambda size: b"x = " + b"[" * (size - 4),
                "deep inline tables": lambda size: _repeat(b"{a=", size, prefix=b"x = "),
                "long escape run": lambda size: _repeat(b"\\\\", size, b'x = "', b'"'),
                "unterminated string of escaped quotes": lambda size: _repeat(
                    b'\\"', size, b'x = "'
                ),
                "many keys": lambda size: b"".join(
                    b"k%07d = 1\n" % index for index in range(max(1, size // 12))
                ),
                "many tables": lambda size: b"".join(
                    b"[t%07d]\n" % index for index in range(max(1, size // 11))
                ),
                "long digit run": lambda size: _repeat(b"1", size, b"x = "),
            }.items()
        ],
    ]


# --------------------------------------------------------------------------- catalog


def _catalog_cases() -> list[Case]:
    from catalog import ComponentIndex, PlanningError, ValidationAnalysis
    from catalog._errors import CatalogError
    from catalog._jsonio import loads_strict

    @_refusing(CatalogError)
    def index(data: bytes) -> object:
        return ComponentIndex.from_dict(loads_strict(data, PlanningError, "index"))

    @_refusing(CatalogError)
    def analysis(data: bytes) -> object:
        return ValidationAnalysis.from_dict(loads_strict(data, PlanningError, "analysis"))

    return [
        *_json_cases("catalog.read_index", index),
        Case("catalog.read_analysis", "many holes", _many_holes, analysis),
        # A slow pure-Python stage: measured at 2 KiB and 32 KiB (still a 16x step).
        Case("catalog.readiness", "many declarations", _many_declarations, _readiness, *_SLOWER),
    ]


def _holes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "hole_id": f"h{index:07d}",
            "schema_id": "VSTD-2",
            "interaction_mode": "OFFLINE_REPLAY",
            "mechanism_id": "vstd.typed_formation.checked.0.1",
        }
        for index in range(count)
    ]


def _many_holes(size: int) -> bytes:
    analysis = {
        "schema_version": "EVIDENCED-VALIDATION-ANALYSIS-0.1",
        "analysis_id": "a",
        "holes": _holes(max(1, size // 130)),
    }
    return json.dumps(analysis, separators=(",", ":")).encode()


_PLANNED_COMPONENT: Final = "component:artifact-network-typed-formation-session-mechanism"


def _many_declarations(size: int) -> bytes:
    """The declarations file of an analysis of ``count`` holes: one per planned candidate."""
    count = max(1, size // 110)
    declarations = [
        {"candidate_id": f"candidate:h{index:07d}:{_PLANNED_COMPONENT}"} for index in range(count)
    ]
    return json.dumps({"holes": count, "declarations": declarations}).encode()


def _readiness(data: bytes) -> object:
    from catalog import (
        ValidationAnalysis,
        assess_execution_readiness,
        plan_validation,
        reference_registry,
    )
    from catalog._readiness import declarations_from_json

    document = json.loads(data)
    registry = reference_registry()
    analysis = ValidationAnalysis.from_dict(
        {
            "schema_version": "EVIDENCED-VALIDATION-ANALYSIS-0.1",
            "analysis_id": "a",
            "holes": _holes(document["holes"]),
        }
    )
    plan = plan_validation(analysis, registry)
    by_id = {candidate.candidate_id: candidate for candidate in plan.candidates}
    entries = []
    for item in document["declarations"]:
        candidate = by_id[item["candidate_id"]]
        entries.append(
            {
                "candidate_id": candidate.candidate_id,
                "component_id": candidate.component_id,
                "native_input_bindings": [],
                "evidence_mappings": [],
                "prerequisite_resolutions": [],
            }
        )
    declarations = declarations_from_json(entries)
    return assess_execution_readiness(analysis, plan, registry, declarations, None, None)


# --------------------------------------------------------------------------- all


@functools.cache
def all_cases() -> tuple[Case, ...]:
    """Every case, grouped by parser (imports the parsers on first use)."""
    return (
        *_canonical_cases(),
        *_formation_cases(),
        *_silo_cases(),
        *_receipt_cases(),
        *_descriptor_cases(),
        *_holdout_cases(),
        *_daemon_cases(),
        *_catalog_cases(),
    )
