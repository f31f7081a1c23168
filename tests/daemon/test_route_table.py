"""The one route table (``daemon/server/_routes.py``): what the codec dispatches is what the
table declares, the table refuses a shape the dispatch cannot serve, and ``docs/http.md``'s
route list is the table's. (A live daemon answering every operation and refusing every other
path: ``tests/daemon/test_openapi.py``.)"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest
from http_testkit import matches, off_table_paths

from daemon.server import _http_server
from daemon.server._http_codec import route
from daemon.server._http_errors import HttpRefusal
from daemon.server._routes import TABLE, Auth, Match, Operation, Route, check
from daemon.wire._protocol import ErrorCode

ROOT = Path(__file__).resolve().parents[2]


def test_every_route_has_an_operation_and_every_operation_a_route() -> None:
    assert {operation.route for operation in TABLE} == set(Route)
    assert len({operation.operation_id for operation in TABLE}) == len(TABLE)


@pytest.mark.parametrize("operation", TABLE, ids=lambda op: op.operation_id)
def test_the_codec_dispatches_each_operation_to_its_route(operation: Operation) -> None:
    path = operation.sample.split("?", 1)[0]
    assert matches(operation, path)
    found, session = route(operation.method, path)
    assert found is operation.route
    assert (session is not None) == (operation.match is Match.SESSION)
    other = "POST" if operation.method == "GET" else "GET"
    with pytest.raises(HttpRefusal) as refused:
        route(other, path)
    assert refused.value.status == 405
    assert list(refused.value.headers) == [("Allow", operation.method)]


def test_a_path_off_the_table_is_never_dispatched() -> None:
    """A route the table does not declare cannot be served: every path near the table's that
    no template matches is the dispatcher's 404, whatever the method."""
    for path in off_table_paths():
        for method in ("GET", "POST"):
            with pytest.raises(HttpRefusal) as refused:
                route(method, path)
            assert refused.value.code is ErrorCode.UNKNOWN_KIND, path
            assert refused.value.status == 404, path


def test_the_open_routes_are_the_tables() -> None:
    opened = {operation.route for operation in TABLE if operation.auth is Auth.OPEN}
    assert opened == {Route.HEALTH, Route.READY}
    assert opened == _http_server._OPEN_ROUTES


def test_a_table_missing_a_route_is_refused() -> None:
    with pytest.raises(ValueError, match="routes without an operation"):
        check(tuple(operation for operation in TABLE if operation.route is not Route.BATCH))


def test_a_session_route_the_dispatch_cannot_serve_is_refused() -> None:
    """The codec's session pattern serves ``/decisions`` and ``/decisions:batch``, both POST:
    a table declaring another tail (or method) would describe a route nobody serves."""
    batch = next(operation for operation in TABLE if operation.route is Route.BATCH)
    for changed in (
        attrs.evolve(batch, path="/v1/sessions/{name}/decisions:many"),
        attrs.evolve(batch, method="PUT"),
    ):
        table = tuple(changed if operation is batch else operation for operation in TABLE)
        with pytest.raises(ValueError, match="session operations"):
            check(table)


def test_a_second_exact_path_for_one_route_is_refused() -> None:
    health = next(operation for operation in TABLE if operation.route is Route.HEALTH)
    twin = attrs.evolve(health, path="/healthz", operation_id="getHealthz", match=Match.PREFIX)
    with pytest.raises(ValueError, match="more than one method or match"):
        check((*TABLE, twin))


def test_docs_http_md_lists_exactly_the_routes_of_the_table() -> None:
    """The Endpoints table of docs/http.md: one row per operation, its operationId, method
    and path template (a query string shown is the route's own parameters)."""
    text = (ROOT / "docs" / "http.md").read_text("utf-8")
    section = text.split("## Endpoints", 1)[1].split("\n\n", 2)[1]
    rows = re.findall(r"^\| `(\w+)` \| `(GET|POST) ([^`?]+)[^`]*`[^|]*\|", section, re.MULTILINE)
    assert len(rows) == len(section.strip().splitlines()) - 2  # every row is an operation
    assert sorted(rows) == sorted((op.operation_id, op.method, op.path) for op in TABLE)
