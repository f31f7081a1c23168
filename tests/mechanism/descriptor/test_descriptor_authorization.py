"""Path C: the exact local allowlist (no patterns, no defaults that allow) and the config digest."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from mechanism.canonical import canonical_digest
from mechanism.descriptor import (
    DEFAULT_ALLOWLIST,
    DEFAULT_POLICY,
    AllowlistEntry,
    AllowlistError,
    AuthorizationConfig,
    parse_allowlist,
)

from ._support import SAFETENSORS_REF, TISC_REF, fixture, sha256_ref


def _doc(*entries: Mapping[str, object], schema: str = "t81.descriptor-allowlist.v1") -> bytes:
    return json.dumps({"schema_version": schema, "entries": [dict(e) for e in entries]}).encode()


RUN = {"provider": "t81vm", "operation": "run", "payload_reference": TISC_REF}


def test_default_allowlist_holds_exactly_the_two_fixture_entries() -> None:
    assert parse_allowlist(DEFAULT_ALLOWLIST) == (
        AllowlistEntry("t81vm", "run", TISC_REF),
        AllowlistEntry("native-weights", "inspect", SAFETENSORS_REF),
    )


REFUSED = [
    ("wildcard_reference", _doc({**RUN, "payload_reference": "*"}), "ALLOWLIST_PATTERN_REFUSED"),
    ("wildcard_provider", _doc({**RUN, "provider": "*"}), "ALLOWLIST_PATTERN_REFUSED"),
    ("glob_operation", _doc({**RUN, "operation": "r?n"}), "ALLOWLIST_PATTERN_REFUSED"),
    (
        "regex_reference",
        _doc({**RUN, "payload_reference": "^c5f5.*$"}),
        "ALLOWLIST_PATTERN_REFUSED",
    ),
    (
        "prefix_reference",
        _doc({**RUN, "payload_reference": TISC_REF[:8]}),
        "ALLOWLIST_ENTRY_INVALID",
    ),
    (
        "upper_case_reference",
        _doc({**RUN, "payload_reference": TISC_REF.upper()}),
        "ALLOWLIST_ENTRY_INVALID",
    ),
    ("empty_provider", _doc({**RUN, "provider": ""}), "ALLOWLIST_ENTRY_INVALID"),
    ("extra_key", _doc({**RUN, "allow": True}), "ALLOWLIST_ENTRY_INVALID"),
    ("missing_key", _doc({"provider": "t81vm", "operation": "run"}), "ALLOWLIST_ENTRY_INVALID"),
    ("non_string_value", _doc({**RUN, "operation": 1}), "ALLOWLIST_ENTRY_INVALID"),
    ("duplicate_entry", _doc(RUN, RUN), "ALLOWLIST_DUPLICATE_ENTRY"),
    (
        "other_schema",
        _doc(RUN, schema="t81.descriptor-allowlist.v2"),
        "ALLOWLIST_SCHEMA_UNSUPPORTED",
    ),
    (
        "duplicate_json_key",
        b'{"schema_version":"x","schema_version":"y","entries":[]}',
        "ALLOWLIST_INVALID",
    ),
    ("not_json", b"t81vm run *", "ALLOWLIST_INVALID"),
    ("oversize", _doc(RUN) + b" " * 70_000, "ALLOWLIST_INVALID"),
    ("bad_utf8", b'{"schema_version":"\xff"}', "ALLOWLIST_INVALID"),
    (
        "entries_not_list",
        b'{"schema_version":"t81.descriptor-allowlist.v1","entries":{}}',
        "ALLOWLIST_INVALID",
    ),
    (
        "extra_top_level_key",
        b'{"schema_version":"t81.descriptor-allowlist.v1","entries":[],"default":"allow"}',
        "ALLOWLIST_INVALID",
    ),
]


@pytest.mark.parametrize(
    ("data", "code"), [(d, c) for _, d, c in REFUSED], ids=[n for n, _, _ in REFUSED]
)
def test_allowlist_refusals_have_stable_codes(data: bytes, code: str) -> None:
    with pytest.raises(AllowlistError) as caught:
        parse_allowlist(data)
    assert caught.value.code == code


def test_empty_allowlist_denies_every_path_c_request() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, _doc())
    report = config.authorize("native-weights", "inspect", SAFETENSORS_REF)
    assert (report.status, report.reason_code) == ("DENIED", "AUTHORIZATION_NOT_ALLOWLISTED")


def test_missing_entry_is_not_allowlisted() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, fixture("allowlist-missing-weights.json"))
    report = config.authorize("native-weights", "inspect", SAFETENSORS_REF)
    assert (report.status, report.reason_code) == ("DENIED", "AUTHORIZATION_NOT_ALLOWLISTED")


def test_an_allowlist_entry_for_a_different_payload_does_not_authorize() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, DEFAULT_ALLOWLIST)
    report = config.authorize("native-weights", "inspect", TISC_REF)
    assert report.reason_code == "AUTHORIZATION_NOT_ALLOWLISTED"


def test_the_allowlist_never_decides_path_b() -> None:
    for allowlist in (_doc(), fixture("allowlist-wildcard.json")):
        config = AuthorizationConfig(DEFAULT_POLICY, allowlist)
        assert config.authorize("t81vm", "run", TISC_REF).status == "AUTHORIZED"


def test_axion_never_decides_path_c() -> None:
    config = AuthorizationConfig(fixture("policy-unknown-clause.apl"), DEFAULT_ALLOWLIST)
    assert config.authorize("native-weights", "inspect", SAFETENSORS_REF).status == "AUTHORIZED"


def test_wildcard_allowlist_fails_closed() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, fixture("allowlist-wildcard.json"))
    report = config.authorize("native-weights", "inspect", SAFETENSORS_REF)
    assert (report.status, report.reason_code) == ("DENIED", "AUTHORIZATION_ALLOWLIST_INVALID")


def test_unparsable_policy_fails_path_b_closed() -> None:
    config = AuthorizationConfig(fixture("policy-unknown-clause.apl"), DEFAULT_ALLOWLIST)
    report = config.authorize("t81vm", "run", TISC_REF)
    assert (report.status, report.reason_code) == ("DENIED", "AUTHORIZATION_POLICY_INVALID")


def test_each_provider_takes_exactly_its_own_path() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, DEFAULT_ALLOWLIST)
    run = config.authorize("t81vm", "run", TISC_REF)
    assert [path["path"] for path in run.paths] == ["axion_final_authorization"]
    assert run.paths[0]["context"]["final_authorization"] is True
    inspect = config.authorize("native-weights", "inspect", SAFETENSORS_REF)
    assert [path["path"] for path in inspect.paths] == ["exact_local_allowlist"]


def test_path_b_denial_by_policy_entry() -> None:
    config = AuthorizationConfig(fixture("policy-wrong-payload.apl"), DEFAULT_ALLOWLIST)
    report = config.authorize("t81vm", "run", TISC_REF)
    assert (report.status, report.reason_code) == ("DENIED", "AUTHORIZATION_AXION_DENIED")


def test_configuration_digest_binds_both_policy_and_allowlist_bytes() -> None:
    config = AuthorizationConfig(DEFAULT_POLICY, DEFAULT_ALLOWLIST)
    assert config.digest == canonical_digest(
        {
            "schema_version": "t81.descriptor-authorization.v1",
            "axion_policy": sha256_ref(DEFAULT_POLICY),
            "allowlist": sha256_ref(DEFAULT_ALLOWLIST),
        }
    )
    assert AuthorizationConfig(DEFAULT_POLICY + b" ", DEFAULT_ALLOWLIST).digest != config.digest
    assert AuthorizationConfig(DEFAULT_POLICY, DEFAULT_ALLOWLIST + b" ").digest != config.digest
