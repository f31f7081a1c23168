"""The command-line contract (docs/cli.md), for every command, table-driven and in-process.

Every leaf command is discovered from the parser itself, so a command added later is covered
at once: ``--help`` (text, exit 0, the exit table), an unknown option (exit 2, the error
document, one stderr line prefixed with the command path), and help text for every option. The
table below then runs each command's success and error paths through ``daemon.cli.main`` and
checks the exit code and the JSON shape of stdout (exactly one document; an error is
``{"error": {"code", "message", "exit"}}``). One real ``evidenced serve`` process answers the
client commands. The observed defects of the issue this contract came from each have a test
here or beside the command's own tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import clirun
import pytest
import testdata

import catalog.cli
from daemon.cli import build_parser
from session import MAX_INPUT_FILE_BYTES, cli

ROOT = testdata.REPO
FORMATION = ROOT / "fixtures" / "formation"
DESCRIPTOR = ROOT / "fixtures" / "descriptor"
SUBJECT = str(FORMATION / "compose.subject.json")
CERTIFICATE = str(FORMATION / "compose.certificate.json")
TISC = str(DESCRIPTOR / "tisc-fixture.bin")
TISC_DESCRIPTOR = str(DESCRIPTOR / "descriptor-tisc.txt")
CHALLENGES = str(ROOT / "fixtures" / "holdout" / "challenges" / "public-s.json")
MISSING = "/nonexistent/evidenced-missing"


def _leaves() -> list[tuple[str, ...]]:
    parser = build_parser()
    found: list[tuple[str, ...]] = []

    def visit(node: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        children = [a for a in node._actions if isinstance(a, argparse._SubParsersAction)]
        if not children:
            found.append(path)
            return
        for action in children:
            for name, child in action.choices.items():
                visit(child, (*path, name))

    visit(parser, ())
    return found


def _groups() -> list[tuple[str, ...]]:
    """Commands that only group others (``audit``, ``formation receipt`` …)."""
    leaves = set(_leaves())
    return sorted({leaf[:i] for leaf in leaves for i in range(1, len(leaf))} - leaves)


LEAVES = _leaves()


def run(*argv: str | Path, stdin: bytes = b"") -> clirun.CliResult:
    result = clirun.in_process(argv, stdin=stdin)
    assert "Traceback" not in result.err, result.err
    return result


def one_document(result: clirun.CliResult) -> Any:
    """stdout is exactly one JSON document (compact: one line)."""
    text = result.stdout.decode("utf-8")
    document, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one document: {text!r}"
    return document


def assert_error(result: clirun.CliResult, exit_code: int, code: str | None = None) -> None:
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.err)
    error = clirun.error_of(result)
    if code is not None:
        assert error["code"] == code, error


# --------------------------------------------------------------------------- discovered


def test_the_parser_tree_has_the_commands_of_the_readme() -> None:
    names = {" ".join(leaf) for leaf in LEAVES}
    assert {"serve", "submit", "config check", "audit verify", "formation check"} <= names
    assert {"descriptor make", "catalog list", "holdout score", "demo"} <= names


@pytest.mark.parametrize("leaf", LEAVES, ids=" ".join)
def test_help_is_text_with_the_exit_table(leaf: tuple[str, ...]) -> None:
    result = run(*leaf, "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert text.startswith(f"usage: evidenced {' '.join(leaf)}")
    for code, meaning in cli.EXIT_TABLE:
        assert f"{code:>3}  {meaning}" in text


@pytest.mark.parametrize("leaf", LEAVES, ids=" ".join)
def test_an_unknown_option_is_a_usage_error_document(leaf: tuple[str, ...]) -> None:
    result = run(*leaf, "--no-such-option")
    assert_error(result, 2, "USAGE")
    assert result.err.startswith(f"evidenced {' '.join(leaf)}: usage error: ")


@pytest.mark.parametrize("leaf", LEAVES, ids=" ".join)
def test_every_option_and_argument_has_help_text(leaf: tuple[str, ...]) -> None:
    parser = build_parser(leaf[0])
    for name in leaf:
        group = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = group.choices[name]
    for option in parser._actions:
        if isinstance(option, argparse._HelpAction) or option.help == argparse.SUPPRESS:
            continue
        assert option.help, f"{' '.join(leaf)} {option.option_strings or option.dest}"


@pytest.mark.parametrize("group", _groups(), ids=" ".join)
def test_a_group_without_its_command_is_a_usage_error_document(group: tuple[str, ...]) -> None:
    assert_error(run(*group), 2, "USAGE")


def test_bare_evidenced_is_a_usage_error_document() -> None:
    assert_error(run(), 2, "USAGE")
    assert_error(run("--pretty"), 2, "USAGE")


def test_version_and_help_are_text() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("evidenced ")
    assert run("--help").returncode == 0


# --------------------------------------------------------------------------- the table


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One real ``evidenced serve`` on a Unix socket (short path: /tmp)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="evc", dir="/tmp"))
    process = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "serve", "--socket", str(folder / "s"),
         "--audit-log", str(folder / "audit.jsonl")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder,
    )  # fmt: skip
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())
    try:
        yield {**ready, "folder": folder}
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


Case = tuple[str, Callable[[dict[str, Any], Path], list[str]], int, str | None]

#: (name, argv builder (daemon, tmp), exit code, error code or None for an answer document).
CASES: list[Case] = [
    ("formation check", lambda d, t: ["formation", "check", SUBJECT, CERTIFICATE], 0, None),
    ("formation check missing", lambda d, t: ["formation", "check", MISSING, CERTIFICATE],
     66, "INPUT_UNREADABLE"),
    ("formation produce", lambda d, t: ["formation", "produce", SUBJECT], 0, None),
    ("formation produce missing", lambda d, t: ["formation", "produce", MISSING],
     66, "INPUT_UNREADABLE"),
    ("formation evaluate", lambda d, t: ["formation", "evaluate", SUBJECT, CERTIFICATE], 0, None),
    ("formation explain", lambda d, t: ["formation", "explain", SUBJECT, CERTIFICATE], 0, None),
    ("formation explain --out unwritable",
     lambda d, t: ["formation", "explain", SUBJECT, CERTIFICATE, "--format", "svg",
                   "--out", f"{MISSING}/x.svg"], 73, "OUTPUT_UNWRITABLE"),
    ("descriptor check", lambda d, t: ["descriptor", "check", TISC_DESCRIPTOR, TISC,
                                       "--operation", "run"], 0, None),
    ("descriptor make", lambda d, t: ["descriptor", "make", TISC], 0, None),
    ("descriptor make --out unwritable",
     lambda d, t: ["descriptor", "make", TISC, "--out", f"{MISSING}/d.txt"],
     73, "OUTPUT_UNWRITABLE"),
    ("descriptor make rejected", lambda d, t: ["descriptor", "make", TISC_DESCRIPTOR],
     65, "DESCRIPTOR_UNKNOWN_PAYLOAD"),
    ("descriptor run-tisc", lambda d, t: ["descriptor", "run-tisc", TISC], 0, None),
    ("catalog list", lambda d, t: ["catalog", "list"], 0, None),
    ("catalog show unknown", lambda d, t: ["catalog", "show", "component:nope"],
     65, "UNKNOWN_COMPONENT"),
    ("catalog plan missing", lambda d, t: ["catalog", "plan", MISSING], 66, "INPUT_UNREADABLE"),
    ("holdout release", lambda d, t: ["holdout", "release"], 0, None),
    ("holdout observe --out unwritable",
     lambda d, t: ["holdout", "observe", CHALLENGES, "--out", f"{MISSING}/o.json"],
     73, "OUTPUT_UNWRITABLE"),
    ("config check", lambda d, t: ["config", "check"], 0, None),
    ("config default", lambda d, t: ["config", "default"], 0, None),
    ("config check missing", lambda d, t: ["config", "check", MISSING], 66, "INPUT_UNREADABLE"),
    ("serve --check", lambda d, t: ["serve", "--check"], 0, None),
    ("serve bad config", lambda d, t: ["serve", "--config", str(DESCRIPTOR / "policy-default.apl")],
     65, "CONFIG_INVALID"),
    ("sessions", lambda d, t: ["sessions", "--socket", d["unix"]], 0, None),
    ("health", lambda d, t: ["health", "--socket", d["unix"]], 0, None),
    ("health unreachable", lambda d, t: ["health", "--socket", str(t / "nobody")],
     69, "UNREACHABLE"),
    ("submit", lambda d, t: ["submit", "--socket", d["unix"], "--session", "formation",
                             SUBJECT, CERTIFICATE], 0, None),
    ("submit one file", lambda d, t: ["submit", "--socket", d["unix"], "--session", "formation",
                                      SUBJECT], 2, "USAGE"),
    ("submit unknown session", lambda d, t: ["submit", "--socket", d["unix"], "--session",
                                             "nope", SUBJECT, CERTIFICATE],
     65, "UNKNOWN_SESSION"),
    ("submit missing file", lambda d, t: ["submit", "--socket", d["unix"], "--session",
                                          "formation", MISSING, CERTIFICATE],
     66, "INPUT_UNREADABLE"),
    ("audit verify", lambda d, t: ["audit", "verify", d["audit_log"]], 0, None),
    ("audit verify malformed anchor",
     lambda d, t: ["audit", "verify", d["audit_log"], "--anchor", "sha256:0000"], 2, "USAGE"),
    ("audit verify missing", lambda d, t: ["audit", "verify", MISSING], 66, "INPUT_UNREADABLE"),
    ("audit tail", lambda d, t: ["audit", "tail", d["audit_log"], "-n", "1"], 0, None),
    ("audit tail negative", lambda d, t: ["audit", "tail", d["audit_log"], "-n", "-1"],
     2, "USAGE"),
    ("audit report", lambda d, t: ["audit", "report", d["audit_log"]], 0, None),
    ("audit rotate held", lambda d, t: ["audit", "rotate", d["audit_log"]], 75,
     "AUDIT_LOG_IN_USE"),
    ("serve on a held log", lambda d, t: ["serve", "--socket", str(t / "s2"), "--audit-log",
                                          d["audit_log"]], 75, "AUDIT_LOG_IN_USE"),
    ("log verify-receipt missing",
     lambda d, t: ["log", "verify-receipt", MISSING, "--key", "x+1+AAAA"], 65, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "exit_code", "code"), CASES, ids=[c[0] for c in CASES])
def test_every_command_answers_with_one_document_and_its_exit_code(
    name: str,
    argv: Callable[[dict[str, Any], Path], list[str]],
    exit_code: int,
    code: str | None,
    daemon: dict[str, Any],
    tmp_path: Path,
) -> None:
    args = argv(daemon, tmp_path)
    result = run(*args)
    assert result.returncode == exit_code, (result.stdout[:300], result.err)
    document = one_document(result)
    if exit_code == 0:
        assert not (isinstance(document, dict) and "error" in document), document
    else:
        assert_error(result, exit_code, code)
    leaf = max((leaf for leaf in LEAVES if tuple(args[: len(leaf)]) == leaf), key=len)
    for line in result.err.splitlines():
        assert line.startswith(f"evidenced {' '.join(leaf)}: "), line


def test_the_table_covers_every_leaf_command_but_the_long_running_ones() -> None:
    covered = {" ".join(case[0].split(" ")[:2]) for case in CASES}
    covered |= {case[0].split(" ")[0] for case in CASES}
    untabled = {
        " ".join(leaf)
        for leaf in LEAVES
        if " ".join(leaf) not in covered and leaf[0] not in covered
    }
    # Covered by their own tests (long-running, or needing keys and built data).
    assert untabled <= {
        "demo",
        "formation inspect-silo",
        "formation receipt build",
        "formation receipt recheck",
        "catalog search",
        "catalog package build",
        "catalog package verify",
        "catalog readiness",
        "holdout score",
        "holdout commit",
        "holdout interop",
        "log keygen",
        "log verify",
        "log monitor",
        "log cosign",
    } | {" ".join(leaf) for leaf in LEAVES if leaf[0] not in {
        "serve", "submit", "sessions", "health", "audit", "config", "log", "formation",
        "descriptor", "catalog", "holdout", "demo"}}, untabled  # fmt: skip


# --------------------------------------------------------------------------- every way out


def test_pretty_indents_the_same_document() -> None:
    compact = run("catalog", "list")
    pretty = run("catalog", "list", "--pretty")
    before = run("--pretty", "catalog", "list")
    assert compact.stdout.count(b"\n") == 1 and pretty.stdout.count(b"\n") > 10
    assert json.loads(pretty.stdout) == json.loads(compact.stdout) == json.loads(before.stdout)
    assert (
        compact.stdout
        == json.dumps(
            json.loads(compact.stdout), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
        + b"\n"
    )


def test_dash_is_stdin_wherever_a_file_is_read() -> None:
    subject = Path(SUBJECT).read_bytes()
    piped = run("formation", "produce", "-", stdin=subject)
    named = run("formation", "produce", SUBJECT)
    assert piped.returncode == 0 and piped.stdout == named.stdout
    checked = run("formation", "check", "-", CERTIFICATE, stdin=subject)
    assert checked.returncode == 0 and one_document(checked)["status"] == "CHECKED"


def test_dash_is_stdin_for_the_audit_log_too(tmp_path: Path) -> None:
    """``audit verify -`` read no stdin ("cannot read -: No such file or directory"), the
    contract's one command taking a file without it; ``audit tail -`` neither."""
    from daemon.audit._synthetic import write_synthetic_log

    log = tmp_path / "audit.jsonl"
    write_synthetic_log(log, 50)
    data = log.read_bytes()
    piped, named = run("audit", "verify", "-", stdin=data), run("audit", "verify", log)
    assert piped.returncode == named.returncode == 0, piped.err
    assert one_document(piped) == one_document(named)
    cut = data[: data.rindex(b"\n", 0, len(data) - 1) + 1].replace(b'"seq":7,', b'"seq":8,', 1)
    broken = run("audit", "verify", "-", stdin=cut)
    assert broken.returncode == 1 and one_document(broken)["first_bad_line"] == 7
    tailed = run("audit", "tail", "-", "-n", "2", stdin=data)
    assert tailed.returncode == 0 and one_document(tailed) == one_document(
        run("audit", "tail", log, "-n", "2")
    )
    assert_error(run("audit", "verify", "-", "-", stdin=data), 2, "USAGE")


def test_stdin_is_capped_like_a_file() -> None:
    result = run("formation", "produce", "-", stdin=b" " * (MAX_INPUT_FILE_BYTES + 1))
    assert_error(result, 65, "INPUT_TOO_LARGE")
    assert f"{MAX_INPUT_FILE_BYTES:,}-byte input cap" in result.err


def test_the_contract_cap_is_the_session_cap() -> None:
    assert cli.MAX_INPUT_BYTES == MAX_INPUT_FILE_BYTES


def test_keyboard_interrupt_is_one_error_document_exit_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog.cli, "_cmd_list", interrupted)
    assert_error(run("catalog", "list"), 130, "INTERRUPTED")


def test_an_internal_error_is_one_error_document_exit_70(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(catalog.cli, "_cmd_list", broken)
    result = run("catalog", "list")
    assert_error(result, 70, "INTERNAL")
    assert "ZeroDivisionError: boom" in result.err


def test_a_second_document_is_refused_as_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def twice(args: argparse.Namespace) -> int:
        cli.emit({"one": 1})
        cli.emit({"two": 2})
        return 0

    monkeypatch.setattr(catalog.cli, "_cmd_list", twice)
    result = run("catalog", "list")
    assert result.returncode == 70 and json.loads(result.stdout) == {"one": 1}


def test_writing_to_a_full_stdout_is_exit_73_not_a_read_error() -> None:
    """``catalog list > /dev/full`` used to say "cannot read input", exit 65."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    with open("/dev/full", "wb") as full:
        completed = subprocess.run(
            [sys.executable, "-m", "daemon.cli", "catalog", "list"],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
    assert completed.returncode == 73
    assert completed.stderr.decode() == (
        "evidenced catalog list: cannot write stdout: No space left on device\n"
    )


def test_the_real_process_keeps_the_contract_for_a_usage_error() -> None:
    process = clirun.subprocess_run([], cwd=ROOT)
    assert process == run()
    assert process.returncode == 2 and clirun.error_of(process)["code"] == "USAGE"
