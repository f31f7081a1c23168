"""The provider contract and its registry (entry points ``evidenced.mechanisms``).

The built-in providers are found exactly as a third-party one is (the example ``sri`` package
is installed beside them); a lookup that cannot give one unambiguous, loadable provider is
refused with a message that says why, and nothing is half-loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from session import (
    HOLDOUT_OPTIONS_UNSUPPORTED,
    HOLDOUT_OPTIONS_WEAKENED,
    BytesDigestMechanism,
    CeilingError,
    EvidenceBounds,
    HoldoutOptionsRefused,
    MechanismProvider,
    ProviderLookupError,
    accepted_bounds,
    as_provider,
    holdout_lower_only,
    load_provider,
    load_reference,
    lower_only,
    provider_entries,
    providers_for_mechanism,
)
from session import _plugins as plugins
from session._plugins import BUILT_IN_MECHANISMS, ProviderEntry

BUILT_IN = {"formation", "descriptor", "bytes-sha256"}


def test_built_in_and_example_providers_are_entry_points_of_their_distributions() -> None:
    entries = {entry.name: entry for entry in provider_entries()}
    assert BUILT_IN | {"sri"} <= set(entries)
    assert {entries[name].distribution for name in BUILT_IN} == {"evidenced"}
    assert entries["sri"].distribution == "evidenced-sri"
    for name in (*BUILT_IN, "sri"):
        provider = load_provider(name)
        assert isinstance(provider, MechanismProvider)
        mechanism = provider.create(provider.default_options())
        assert mechanism.mechanism_id == provider.mechanism_id
    (found,) = providers_for_mechanism("example.sri.integrity.0.1")
    assert found[0].name == "sri"


def test_the_built_in_table_states_what_each_built_in_provider_makes() -> None:
    """``providers_for_mechanism`` trusts the table instead of importing a built-in provider of
    another mechanism: the table must name every built-in entry and the id each one makes."""
    built_in = {entry.value for entry in provider_entries() if entry.distribution == "evidenced"}
    assert built_in == set(BUILT_IN_MECHANISMS)
    for value, mechanism_id in BUILT_IN_MECHANISMS.items():
        provider = load_reference(value)
        assert isinstance(provider, MechanismProvider)
        assert provider.mechanism_id == mechanism_id


def test_a_lookup_imports_no_built_in_provider_of_another_mechanism() -> None:
    """Finding the ``bytes-sha256`` provider never imports the formation or descriptor package
    (their import is most of a one-shot ``submit``); a third-party plugin is still imported,
    since only its own code says which mechanism it makes."""
    probe = (
        "import json, sys\n"
        "from session import providers_for_mechanism\n"
        "found = providers_for_mechanism('vstd.bytes.sha256')\n"
        "print(json.dumps([[e.name for e, _ in found], sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    names, modules = json.loads(done.stdout)
    assert names == ["bytes-sha256"]
    assert not [m for m in modules if m.startswith(("mechanism.formation", "mechanism.descriptor"))]
    assert "evidenced_sri" in modules


def test_a_plugin_claiming_a_built_in_mechanism_id_is_found_beside_the_built_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The table spares the import of built-in providers only: a plugin whose provider makes a
    built-in mechanism id is imported and listed with the built-in one, so a client sees two
    providers (and refuses to guess) exactly as when every provider was imported."""
    impostor = ProviderEntry(
        "bytes-again", "session._bytes_provider:BytesDigestProvider", "impostor", "1"
    )
    installed = plugins.provider_entries
    monkeypatch.setattr(plugins, "provider_entries", lambda: (*installed(), impostor))
    found = providers_for_mechanism("vstd.bytes.sha256")
    assert sorted((entry.name, entry.distribution) for entry, _ in found) == [
        ("bytes-again", "impostor"),
        ("bytes-sha256", "evidenced"),
    ]


def test_an_unknown_provider_name_is_refused_with_the_installed_names() -> None:
    with pytest.raises(ProviderLookupError, match=r"no mechanism provider 'rm-rf'.*formation"):
        load_provider("rm-rf")


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_module_xyz:PROVIDER", "ModuleNotFoundError"),
        ("session:no_such_attribute", "AttributeError"),
        ("session", "not module:attribute"),
    ],
)
def test_an_unloadable_reference_is_a_lookup_error(reference: str, message: str) -> None:
    with pytest.raises(ProviderLookupError, match=message):
        load_reference(reference)


def test_an_entry_point_that_names_no_provider_is_refused() -> None:
    impostor = ProviderEntry("impostor", "session:BytesDigestMechanism", "x", "1")
    with pytest.raises(ProviderLookupError, match="is not a MechanismProvider"):
        impostor.load()
    with pytest.raises(ProviderLookupError, match="is not a MechanismProvider"):
        as_provider(BytesDigestMechanism(), "a mechanism")


def test_a_provider_class_is_instantiated_and_a_nameless_one_refused() -> None:
    provider = as_provider(type(load_provider("bytes-sha256")), "class")
    assert provider.mechanism_id == "vstd.bytes.sha256"

    class Nameless(type(provider)):  # type: ignore[misc]
        mechanism_id = ""

    with pytest.raises(ProviderLookupError, match="mechanism_id must be a non-empty string"):
        as_provider(Nameless(), "nameless")


def test_accepted_bounds_are_read_exactly_and_a_bad_statement_is_a_host_error() -> None:
    class Stated:
        mechanism_id = "m"
        mechanism_digest = "sha256:" + "0" * 64

        def __init__(self, bounds: object) -> None:
            self.accepted_bounds = bounds

    assert accepted_bounds(BytesDigestMechanism()) is None
    assert accepted_bounds(Stated(EvidenceBounds(2, 10))) == EvidenceBounds(2, 10)  # type: ignore[arg-type]
    assert accepted_bounds(Stated(lambda: EvidenceBounds(1, 1))) == EvidenceBounds(1, 1)  # type: ignore[arg-type]
    for bad in ((2, 10), EvidenceBounds(True, 10), lambda: 1 / 0):
        with pytest.raises(ValueError, match="accepted_bounds"):
            accepted_bounds(Stated(bad))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "not-int"),
        ("3", "not-int"),
        (3.0, "not-int"),
        (-1, "negative"),
        (11, "above-ceiling"),
    ],
)
def test_a_ceiling_may_only_be_lowered(value: object, reason: str) -> None:
    with pytest.raises(CeilingError) as refused:
        lower_only("max_nodes", value, 10)
    assert refused.value.reason == reason
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, TypeError)
    assert lower_only("max_nodes", 0, 10) == 0 and lower_only("max_nodes", 10, 10) == 10


def test_holdout_check_options_weaken_only_by_raising_a_ceiling() -> None:
    ceilings = {"a": 5, "b": 5}
    assert holdout_lower_only({"b": 3, "other": "x"}, ceilings) == {"b": 3}
    for options, code in (
        ({"a": 6}, HOLDOUT_OPTIONS_WEAKENED),
        ({"a": -1}, HOLDOUT_OPTIONS_UNSUPPORTED),
        ({"a": True}, HOLDOUT_OPTIONS_UNSUPPORTED),
        ({"a": "x", "b": 9}, HOLDOUT_OPTIONS_UNSUPPORTED),  # ceilings order: a first
    ):
        with pytest.raises(HoldoutOptionsRefused) as refused:
            holdout_lower_only(options, ceilings)
        assert refused.value.code == code


_ANNOUNCED = {
    "mechanism_id": "m.id",
    "mechanism_digest": "sha256:" + "1" * 64,
    "pinned": {"policy": "sha256:" + "2" * 64},
    "accepted_bounds": {"max_evidence_items": 2, "max_evidence_bytes": 4096},
}


@pytest.mark.parametrize(
    "change",
    [
        {"mechanism_id": 7},
        {"mechanism_digest": None},
        {"pinned": {"policy": 1}},
        {"pinned": ["policy"]},
        {"accepted_bounds": {"max_evidence_items": 2, "max_evidence_bytes": True}},
        {"accepted_bounds": {"max_evidence_items": 2}},
        {"accepted_bounds": [2, 4096]},
    ],
)
def test_a_malformed_announcement_is_refused_not_half_trusted(change: dict[str, object]) -> None:
    """What a daemon announces shapes the binding a client pins: a value of the wrong type is
    refused (``evidenced submit`` exits 65), never guessed at."""
    from session import Announcement

    read = Announcement.from_wire(_ANNOUNCED)
    assert read.accepted_bounds == EvidenceBounds(2, 4096)
    assert read.pinned == _ANNOUNCED["pinned"]
    with pytest.raises(ValueError):
        Announcement.from_wire({**_ANNOUNCED, **change})


def test_a_client_binding_never_declares_more_than_the_default_binding() -> None:
    """The default ``client_binding`` only lowers bounds: a daemon announcing larger
    ``accepted_bounds`` than the defaults declare does not widen what the client pins."""
    from session import Announcement

    provider = load_provider("bytes-sha256")
    honest = provider.honest_binding([b"twelve bytes"], provider.default_options())
    wide = Announcement("vstd.bytes.sha256", "sha256:" + "3" * 64, {}, EvidenceBounds(9, 10**9))
    narrow = Announcement("vstd.bytes.sha256", "sha256:" + "3" * 64, {}, EvidenceBounds(1, 4))
    assert provider.client_binding([b"twelve bytes"], wide).bounds == honest.bounds
    assert provider.client_binding([b"twelve bytes"], narrow).bounds == EvidenceBounds(1, 4)
    assert (
        provider.client_binding([b"twelve bytes"], wide).mechanism_digest == wide.mechanism_digest
    )
