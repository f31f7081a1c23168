"""The one set of listener checks: every path that starts, checks or reloads a configuration
runs exactly these, so ``config check``, ``serve --check``, ``serve`` (one process or
``--workers N``), socket activation and a SIGHUP reload cannot disagree.

Rules (the contract), in this order:

1. The listeners checked are the ones that will serve: the inherited sockets
   (``LISTEN_FDS``, or those a ``--workers`` parent bound) when there are any, else the
   configured ``[server] listen``; and the HTTP listener ``[http] listen``. An inherited Unix
   socket is never exposed; an inherited TCP socket serves the binary protocol with
   ``[server]``'s TLS and tokens, so it is checked with them.
2. Exposure (:func:`~daemon.config._security.exposure_problem`): a TCP listener on an address
   that is not loopback without TLS and authentication is refused
   (:class:`~daemon.config._security.ExposureRefused`, every such listener named) unless
   ``insecure_listen``; with it, the listeners are served and :attr:`Checked.exposed` names
   them (``daemon_start``'s ``insecure_listen`` is true exactly when one is).
3. Then each listener's TLS and tokens files are read and checked
   (:meth:`~daemon.config._security.ListenerSecurity.load`: a missing, malformed or loose
   file raises :class:`~daemon.config._tls.TlsConfigError` /
   :class:`~daemon.config._tokens.TokenFileError` naming it).
"""

from __future__ import annotations

import socket as stdlib_socket
from collections.abc import Sequence

import attrs

from daemon.config._hosting import ServerConfig
from daemon.config._security import ExposureRefused, LoadedSecurity, exposure_problem

__all__ = ["Checked", "check_listeners", "exposure_problems"]


@attrs.frozen
class Checked:
    """What :func:`check_listeners` found: the loaded security of the binary protocol's TCP
    listener and of the HTTP listener, and the listeners served exposed (rule 2)."""

    binary: LoadedSecurity
    http: LoadedSecurity
    exposed: tuple[str, ...] = ()


def exposure_problems(
    config: ServerConfig, inherited: Sequence[stdlib_socket.socket] = ()
) -> list[str]:
    """Every listener of rule 1 that rule 2 finds exposed, whatever ``insecure_listen`` says."""
    problems: list[str | None] = []
    tcp_inherited = [sock for sock in inherited if sock.family != stdlib_socket.AF_UNIX]
    if inherited:
        for sock in tcp_inherited:
            host, port = sock.getsockname()[:2]
            problems.append(
                exposure_problem(
                    "binary protocol, inherited socket", str(host), int(port), config.security
                )
            )
    elif config.tcp is not None:
        problems.append(exposure_problem("binary protocol", *config.tcp, config.security))
    if config.http is not None:
        problems.append(exposure_problem("http", *config.http.listen, config.http.security))
    return [problem for problem in problems if problem is not None]


def check_listeners(
    config: ServerConfig, inherited: Sequence[stdlib_socket.socket] = ()
) -> Checked:
    """Run the module rules on ``config`` (and the ``inherited`` listening sockets)."""
    exposed = exposure_problems(config, inherited)
    if exposed and not config.insecure_listen:
        raise ExposureRefused("; ".join(exposed))
    binary = config.security.load()
    http = config.http.security.load() if config.http is not None else LoadedSecurity()
    return Checked(binary, http, tuple(exposed))
