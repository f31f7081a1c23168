"""The OpenAPI 3.1 description of the HTTP API, built from the one route table and served at
``GET /openapi.json`` (``docs/http.md``; a copy is kept in ``docs/openapi.json``).

Rules (the contract):

1. Paths. Every operation of :data:`daemon.server._routes.TABLE`, and nothing else, is an
   operation of the description: its path template, method, ``operationId``, tag, summary,
   parameters, request body and every answer the table states (a refusal's schema is the
   refusal document, its status :data:`daemon.server._http_errors.STATUS_OF`'s). A token route
   says ``security: [{"bearer": []}, {}]`` (a token when the listener has a ``tokens_file``)
   and an open route ``[{}]``; ``x-evidenced-auth`` names which.
2. Answer documents are described as the server writes them: the binary protocol's answer
   headers (``kind``, ``request_id``, ...), the refusal document ``{"error": {...}}`` with the
   closed vocabulary of codes (:data:`daemon.wire._protocol.ERROR_CODES`), a batch's
   ``{"decisions": [...]}``.
3. Results per mechanism. ``Decision.result`` is ``EvaluatedProposition.to_dict()``
   (``Result``): the session's nine fields, then exactly one branch by ``mechanism_id``: for a
   shipped mechanism (:data:`session._plugins.BUILT_IN_MECHANISMS`), and for a third-party
   mechanism a session of this daemon hosts, whose provider states a
   :meth:`~session.MechanismProvider.decision_schema`, the provider's schema of its decisions
   or the host's own ``UNKNOWN`` (``Result.Undecided``: empty observations, as the session and
   the daemon answer a decision no mechanism made); for any other mechanism
   (``Result.Other``), any observations object. There is no ``discriminator``: OpenAPI 3.1's
   has no default mapping for the open branch, and the branches' ``mechanism_id`` constants
   already make them exclusive. A provider schema with a ``$ref`` or ``$id`` (which would
   resolve against this document) or that cannot be loaded is left out (its mechanism is then
   ``Result.Other``).
4. Examples are real answers (``openapi-examples.json`` beside this module, captured from a
   daemon by ``scripts/openapi_examples.py``; ``tests/daemon/test_openapi.py`` submits each
   request again and holds its result equal): the submit and batch requests and answers, and
   each shipped mechanism's results as its branch's ``examples``.
5. :func:`document` with no hosted providers is ``docs/openapi.json`` (:func:`rendered`:
   sorted keys, 2-space indent; ``python -m daemon.server._openapi`` prints it, ``make
   openapi`` writes it). A daemon serves the document of the third-party providers its
   sessions name (:func:`openapi_answer`), rebuilt when a reload changes them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from importlib.resources import files
from typing import Any, Final

from daemon import __version__
from daemon.config._hosting import HostedSession
from daemon.server._http_codec import HttpServerCodec
from daemon.server._routes import JSON, TABLE, TAGS, Answer, Auth, Operation
from daemon.wire._protocol import ERROR_CODES, MAX_BATCH_PAIRS

__all__ = ["SCHEMAS", "document", "examples", "hosted_providers", "openapi_answer", "rendered"]

_HEADERS: Final = {
    "Retry-After": {"schema": {"type": "string"}, "description": "seconds"},
    "Cache-Control": {"schema": {"type": "string"}},
    "Allow": {"schema": {"type": "string"}},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_NULLABLE_STRING: Final = {"type": ["string", "null"]}
_DIGEST: Final = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_PROOF: Final = {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}
_COUNT: Final = {"type": "integer", "minimum": 0}
_EVIDENCE_JSON: Final = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["base64"],
        "additionalProperties": False,
        "properties": {"base64": {"type": "string", "contentEncoding": "base64"}},
    },
}

#: The schemas every description holds (rule 2); the results' are added by :func:`document`.
SCHEMAS: Final[dict[str, Any]] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "fault", "decision_id"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "enum": sorted(ERROR_CODES)},
                    "message": {"type": "string"},
                    "fault": {"type": "string", "enum": ["peer", "service"]},
                    "decision_id": _NULLABLE_STRING,
                },
            }
        },
    },
    "Decision": {
        "type": "object",
        "required": ["kind", "request_id", "decision_id", "session", "result"],
        "additionalProperties": False,
        "properties": {
            "kind": {"const": "decision"},
            "request_id": _COUNT,
            "decision_id": {"type": "string"},
            "session": {"type": "string"},
            "result": _ref("Result"),
            "seq": {"type": ["integer", "null"], "minimum": 1},
            "line_digest": {"oneOf": [_DIGEST, {"type": "null"}]},
            "log_index": {"type": ["integer", "null"], "minimum": 0},
            "audit_line": _NULLABLE_STRING,
        },
    },
    "Batch": {
        "type": "object",
        "required": ["decisions"],
        "additionalProperties": False,
        "properties": {
            "decisions": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH_PAIRS,
                "items": {"oneOf": [_ref("Decision"), _ref("Error")]},
                "description": "one element per pair, in order",
            }
        },
    },
    "Result": {
        "type": "object",
        "description": "EvaluatedProposition.to_dict(): the session's fields, then the "
        "mechanism's decision (outcome, details, observations), described per mechanism",
        "required": [
            "binding_digest",
            "outcome",
            "mechanism_id",
            "mechanism_digest",
            "evidence_refs",
            "trust_roots",
            "observed_evidence_bytes",
            "details",
            "observations",
        ],
        "additionalProperties": False,
        "properties": {
            "binding_digest": {
                "type": "string",
                "pattern": "^[0-9a-f]{64}$",
                "description": "bare hex SHA-256 of the binding snapshot (its core encoding)",
            },
            "outcome": {"enum": ["PASS", "FAIL", "UNKNOWN"]},
            "mechanism_id": {"type": "string", "minLength": 1},
            "mechanism_digest": _DIGEST,
            "evidence_refs": {"type": "array", "minItems": 1, "items": _DIGEST},
            "trust_roots": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {"type": "string", "minLength": 1},
            },
            "observed_evidence_bytes": _COUNT,
            "details": {"type": "string"},
            "observations": {"type": "object"},
        },
    },
    "Result.Undecided": {
        "description": "the host's UNKNOWN, decided by no mechanism (an unregistered "
        "mechanism or digest, a bound exceeded, evidence not found, a mechanism that raised, "
        "an overrun of the request deadline, a dead worker): empty observations",
        "properties": {
            "outcome": {"const": "UNKNOWN"},
            "observations": {"type": "object", "maxProperties": 0},
        },
    },
    "Sessions": {
        "type": "object",
        "required": ["kind", "request_id", "sessions"],
        "properties": {
            "kind": {"const": "sessions"},
            "request_id": {"type": "integer"},
            "sessions": {"type": "array", "items": {"type": "object"}},
        },
    },
    "Health": {
        "type": "object",
        "required": ["kind", "request_id", "status"],
        "properties": {
            "kind": {"const": "health"},
            "request_id": {"type": "integer"},
            "status": {"type": "object"},
        },
    },
    "Ready": {
        "type": "object",
        "required": ["ready", "status", "reason"],
        "properties": {
            "ready": {"const": True},
            "status": {"const": "serving"},
            "reason": {"type": "null"},
        },
    },
    "InclusionProof": {
        "type": "object",
        "required": ["kind", "request_id", "index", "tree_size", "proof"],
        "properties": {
            "kind": {"const": "inclusion_proof"},
            "request_id": {"type": "integer"},
            "index": _COUNT,
            "tree_size": {"type": "integer", "minimum": 1},
            "proof": _PROOF,
        },
    },
    "ConsistencyProof": {
        "type": "object",
        "required": ["kind", "request_id", "old_size", "new_size", "proof"],
        "properties": {
            "kind": {"const": "consistency_proof"},
            "request_id": {"type": "integer"},
            "old_size": _COUNT,
            "new_size": _COUNT,
            "proof": _PROOF,
        },
    },
    "LogEntry": {
        "type": "object",
        "required": ["log_index", "line"],
        "additionalProperties": False,
        "properties": {
            "log_index": _COUNT,
            "line": {"type": "string", "description": "the audit line, without its newline"},
        },
    },
    "Binding": {
        "type": "object",
        "description": "the bound proposition's wire form, BoundProposition.to_dict() "
        "(docs/protocol.md §3); `evidenced submit --print-binding` prints the honest one",
        "required": [
            "subject_id",
            "predicate",
            "expected",
            "mechanism_id",
            "mechanism_digest",
            "evidence_refs",
            "trust_roots",
            "bounds",
            "parameters",
        ],
        "additionalProperties": False,
        "properties": {
            "subject_id": {"type": "string", "minLength": 1},
            "predicate": {"type": "string", "minLength": 1},
            "expected": {"description": "any JSON value: what the mechanism is to find"},
            "mechanism_id": {"type": "string", "minLength": 1},
            "mechanism_digest": {"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"},
            "evidence_refs": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "pattern": "^(sha256:)?[0-9a-f]{64}$"},
            },
            "trust_roots": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "minLength": 1},
            },
            "bounds": {
                "type": "object",
                "required": ["max_evidence_items", "max_evidence_bytes"],
                "additionalProperties": False,
                "properties": {"max_evidence_items": _COUNT, "max_evidence_bytes": _COUNT},
            },
            "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "SubmitJson": {
        "type": "object",
        "required": ["binding", "evidence"],
        "additionalProperties": False,
        "properties": {"binding": _ref("Binding"), "evidence": _EVIDENCE_JSON},
    },
    "SubmitMultipart": {
        "type": "object",
        "required": ["binding", "evidence"],
        "properties": {
            "binding": _ref("Binding"),
            "evidence": {
                "type": "array",
                "items": {"type": "string", "contentMediaType": "application/octet-stream"},
            },
        },
    },
    "BatchJson": {
        "type": "object",
        "required": ["pairs"],
        "additionalProperties": False,
        "properties": {
            "pairs": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH_PAIRS,
                "items": _ref("SubmitJson"),
            }
        },
    },
    "OpenApi": {"type": "object", "description": "an OpenAPI 3.1 document"},
}


# -- results per mechanism (rule 3)

_NAME_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]")


def _branch_name(mechanism_id: str) -> str:
    return "Result." + _NAME_UNSAFE.sub("_", mechanism_id)


def _self_contained(schema: object) -> bool:
    """No ``$ref``, ``$dynamicRef`` or ``$id`` anywhere (rule 3)."""
    if isinstance(schema, Mapping):
        if {"$ref", "$dynamicRef", "$id"} & set(schema):
            return False
        return all(_self_contained(value) for value in schema.values())
    if isinstance(schema, list):
        return all(_self_contained(value) for value in schema)
    return True


def _built_in_providers() -> list[Any]:
    from session import as_provider, load_reference
    from session._plugins import BUILT_IN_MECHANISMS

    loaded = []
    for value in sorted(BUILT_IN_MECHANISMS):
        try:
            loaded.append(as_provider(load_reference(value), value))
        except LookupError:  # an installation without it describes no branch of it
            continue
    return loaded


def _hosted(names: Iterable[str]) -> list[Any]:
    from session import load_provider

    loaded = []
    for name in names:
        try:
            loaded.append(load_provider(name))
        except LookupError:
            continue
    return loaded


def _result_branches(providers: Iterable[Any]) -> dict[str, Any]:
    """``Result.<mechanism id>`` per provider with a usable decision schema, by id."""
    branches: dict[str, Any] = {}
    for provider in providers:
        identifier = provider.mechanism_id
        try:
            stated = provider.decision_schema()
        except Exception:  # a provider's fault leaves its mechanism undescribed, not the API
            continue
        name = _branch_name(identifier)
        if stated is None or not _self_contained(stated) or name in branches:
            continue
        branches[name] = {
            "description": f"a result of {identifier}: its decision, or the host's UNKNOWN",
            "properties": {"mechanism_id": {"const": identifier}},
            "anyOf": [dict(stated), _ref("Result.Undecided")],
        }
    return branches


@cache
def examples() -> dict[str, Any]:
    """The captured examples (rule 4)."""
    data = files("daemon.server").joinpath("openapi-examples.json").read_bytes()
    captured: dict[str, Any] = json.loads(data)
    return captured


def _results(hosted: tuple[str, ...]) -> dict[str, Any]:
    branches = _result_branches([*_built_in_providers(), *_hosted(hosted)])
    captured = [entry["answer"]["result"] for entry in examples()["decisions"]]
    for schema in branches.values():
        identifier = schema["properties"]["mechanism_id"]["const"]
        found = [result for result in captured if result["mechanism_id"] == identifier]
        if found:
            schema["examples"] = found
    known = sorted(schema["properties"]["mechanism_id"]["const"] for schema in branches.values())
    other = {
        "description": "a result of a mechanism this description has no schema of: its "
        "observations are the mechanism's own object",
        "properties": {"mechanism_id": {"not": {"enum": known}}},
    }
    result = {**SCHEMAS["Result"], "oneOf": [_ref(name) for name in sorted(branches)]}
    result["oneOf"].append(_ref("Result.Other"))
    return {"Result": result, **branches, "Result.Other": other}


# -- paths (rule 1)


def _answer(answer: Answer) -> dict[str, Any]:
    schema = {"type": "string"} if answer.schema is None else _ref(answer.schema)
    described: dict[str, Any] = {
        "description": answer.description,
        "content": {answer.media: {"schema": schema}},
    }
    if answer.headers:
        described["headers"] = {name: _HEADERS[name] for name in answer.headers}
    return described


def _named(entries: Iterable[Mapping[str, Any]], part: str) -> dict[str, Any]:
    return {entry["name"]: {"summary": entry["summary"], "value": entry[part]} for entry in entries}


def _examples_of(operation: Operation) -> tuple[dict[str, Any], dict[str, Any]]:
    """(request examples, 200 answer examples) of a submit or batch operation (rule 4)."""
    captured = examples()
    if operation.operation_id == "submitDecision":
        passed = [
            entry
            for entry in captured["decisions"]
            if entry["answer"]["result"]["outcome"] == "PASS"
        ]
        return _named(passed, "request"), _named(passed, "answer")
    if operation.operation_id == "submitBatch":
        return _named([captured["batch"]], "request"), _named([captured["batch"]], "answer")
    return {}, {}


def _operation(operation: Operation) -> dict[str, Any]:
    requests, answers = _examples_of(operation)
    responses = {status: _answer(answer) for status, answer in sorted(operation.answers.items())}
    if answers:
        responses["200"]["content"][JSON]["examples"] = answers
    described: dict[str, Any] = {
        "operationId": operation.operation_id,
        "tags": [operation.tag],
        "summary": operation.summary,
        "security": [{"bearer": []}, {}] if operation.auth is Auth.TOKEN else [{}],
        "x-evidenced-auth": operation.auth.value,
        "responses": responses,
    }
    if operation.parameters:
        described["parameters"] = [
            {
                "name": parameter.name,
                "in": parameter.where,
                "required": parameter.required,
                "description": parameter.description,
                "schema": dict(parameter.schema),
            }
            for parameter in operation.parameters
        ]
    if operation.body:
        content: dict[str, Any] = {
            media: {"schema": _ref(name)} for media, name in operation.body.items()
        }
        if requests:
            content[JSON]["examples"] = requests
        described["requestBody"] = {"required": True, "content": content}
    return described


def document(hosted: tuple[str, ...] = ()) -> dict[str, Any]:
    """The OpenAPI 3.1 description (module rules) of a daemon whose sessions name the
    third-party providers ``hosted`` (entry-point names)."""
    paths: dict[str, dict[str, Any]] = {}
    for operation in TABLE:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "evidenced HTTP API",
            "version": __version__,
            "description": (
                "Evidence-bound verification sessions over HTTP/1.1 (docs/http.md) and the "
                "transparency log in the C2SP tlog-tiles layout (docs/transparency.md). With a "
                "tokens_file every route but /health and /ready needs a bearer token."
            ),
        },
        "servers": [{"url": "http://127.0.0.1:7434"}],
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": paths,
        "components": {
            "schemas": {**SCHEMAS, **_results(hosted)},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@cache
def rendered(hosted: tuple[str, ...] = ()) -> bytes:
    """:func:`document` as ``docs/openapi.json`` holds it (sorted keys, 2-space indent)."""
    return (json.dumps(document(hosted), indent=2, sort_keys=True) + "\n").encode("utf-8")


def hosted_providers(sessions: Iterable[HostedSession]) -> tuple[str, ...]:
    """The third-party providers (entry-point names) the configuration built ``sessions``
    with, sorted (rule 5)."""
    from session._plugins import BUILT_IN_MECHANISMS

    names = set()
    for session in sessions:
        recipe = session.recipe or {}
        for name, entry in dict(recipe.get("providers") or {}).items():
            if isinstance(entry, Mapping) and entry.get("value") not in BUILT_IN_MECHANISMS:
                names.add(name)
    return tuple(sorted(names))


def openapi_answer(codec: HttpServerCodec, sessions: Iterable[HostedSession] = ()) -> bytes:
    """``GET /openapi.json`` of a daemon hosting ``sessions``."""
    return codec.respond(200, rendered(hosted_providers(sessions)))


if __name__ == "__main__":
    sys.stdout.buffer.write(rendered())
