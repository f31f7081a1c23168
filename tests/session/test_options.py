"""Typed provider options: one converter, exact types, unknown keys refused, the path named.

Every refusal is an ``OptionsError`` whose message starts with the full key path; nothing is
coerced (``true`` is not ``1``, ``"8"`` is not ``8``).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from session import NoOptions, OptionsError, structure_options

WHERE = "sessions.formation.options.formation"


@attrs.frozen
class Limits:
    depth: int = 4


@attrs.frozen
class Example:
    max_nodes: int = 1024
    label: str | None = None
    rate: float = 1.0
    algorithms: tuple[str, ...] = ("sha384",)
    strict: bool = False
    limits: Limits = Limits()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"max_nodes": True}, f"{WHERE}.max_nodes: expected int, got bool"),
        ({"max_nodes": "8"}, f"{WHERE}.max_nodes: expected int, got str"),
        ({"max_nodes": 8.0}, f"{WHERE}.max_nodes: expected int, got float"),
        ({"strict": 1}, f"{WHERE}.strict: expected bool, got int"),
        ({"label": 3}, f"{WHERE}.label: expected str, got int"),
        ({"rate": True}, f"{WHERE}.rate: expected float, got bool"),
        ({"algorithms": "sha384"}, f"{WHERE}.algorithms: expected array, got str"),
        ({"algorithms": ["sha384", 5]}, f"{WHERE}.algorithms[1]: expected str, got int"),
        ({"limits": 3}, f"{WHERE}.limits: expected table, got int"),
        ({"limits": {"depth": False}}, f"{WHERE}.limits.depth: expected int, got bool"),
        ({"limits": {"width": 1}}, f"{WHERE}.limits: unknown key 'width'"),
        ({"max_node": 8}, f"{WHERE}: unknown key 'max_node'"),
        ({"a": 1, "b": 2}, f"{WHERE}: unknown keys ['a', 'b']"),
        ([("max_nodes", 8)], f"{WHERE}: expected table, got array"),
    ],
)
def test_ill_typed_or_unknown_options_are_refused_with_the_full_key_path(
    raw: object, message: str
) -> None:
    with pytest.raises(OptionsError) as refused:
        structure_options(Example, raw, where=WHERE)
    assert str(refused.value) == message


def test_every_violation_is_named_in_document_order() -> None:
    with pytest.raises(OptionsError) as refused:
        structure_options(Example, {"max_nodes": "8", "strict": 0}, where=WHERE)
    assert str(refused.value) == (
        f"{WHERE}.max_nodes: expected int, got str; {WHERE}.strict: expected bool, got int"
    )


def test_exact_values_structure_and_floats_take_integers() -> None:
    options: Any = structure_options(
        Example,
        {"max_nodes": 8, "label": None, "rate": 2, "algorithms": ["sha512"], "limits": {}},
        where=WHERE,
    )
    assert options == Example(max_nodes=8, rate=2.0, algorithms=("sha512",))
    assert type(options.rate) is float
    assert structure_options(Example, {}, where=WHERE) == Example()


def test_a_provider_without_options_accepts_only_the_empty_table() -> None:
    assert structure_options(NoOptions, {}) == NoOptions()
    with pytest.raises(OptionsError, match=r"^options: unknown key 'unexpected'$"):
        structure_options(NoOptions, {"unexpected": 1})


def test_a_missing_field_without_default_is_required() -> None:
    @attrs.frozen
    class Needs:
        key: str

    with pytest.raises(OptionsError, match=r"^w\.key: required$"):
        structure_options(Needs, {}, where="w")
