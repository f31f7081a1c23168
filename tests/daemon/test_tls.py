"""TLS contexts over real sockets with throwaway CAs (daemon/_tls)."""

from __future__ import annotations

import ssl
import warnings
from pathlib import Path

import pytest
import trio
import trustme

from daemon.config._tls import (
    TlsConfig,
    TlsConfigError,
    client_context,
    peer_identity,
    server_context,
)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def files(ca: trustme.CA, directory: Path) -> dict[str, str]:
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example", common_name="ci-runner")
    paths = {name: str(directory / f"{name}.pem") for name in ("ca", "cert", "key", "ccert")}
    ca.cert_pem.write_to_path(paths["ca"])
    server.private_key_pem.write_to_path(paths["key"])
    for blob in server.cert_chain_pems:
        blob.write_to_path(paths["cert"], append=True)
    client.private_key_and_cert_chain_pem.write_to_path(paths["ccert"])
    return paths


async def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext
) -> tuple[dict[str, str] | None, BaseException | None, bytes]:
    """One TLS connection over a real TCP socket: (the server's view of the client's
    certificate, the server's handshake error, what the client read)."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    outcome: dict[str, object] = {"identity": None, "error": None}
    received = b""

    async def serve_one() -> None:
        stream = await listeners[0].accept()
        tls = trio.SSLStream(stream, server, server_side=True)
        try:
            await tls.do_handshake()
            outcome["identity"] = peer_identity(tls)
            await tls.send_all(b"hello")
        except trio.BrokenResourceError as error:
            outcome["error"] = error
        finally:
            await trio.aclose_forcefully(tls)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_one)
        raw = await trio.open_tcp_stream("127.0.0.1", port)
        tls = trio.SSLStream(raw, client, server_hostname="127.0.0.1")
        try:
            await tls.do_handshake()
            received = bytes(await tls.receive_some(5))
        except trio.BrokenResourceError:
            pass
        finally:
            await trio.aclose_forcefully(tls)
    await listeners[0].aclose()
    identity = outcome["identity"]
    error = outcome["error"]
    assert identity is None or isinstance(identity, dict)
    assert error is None or isinstance(error, BaseException)
    return identity, error, received


async def test_verified_handshake_carries_bytes(ca: trustme.CA, tmp_path: Path) -> None:
    paths = files(ca, tmp_path)
    server = server_context(TlsConfig(paths["cert"], paths["key"]))
    identity, error, received = await handshake(server, client_context(ca=paths["ca"]))
    assert (identity, error, received) == (None, None, b"hello")


async def test_a_client_that_does_not_trust_the_server_is_refused(
    ca: trustme.CA, tmp_path: Path
) -> None:
    paths = files(ca, tmp_path)
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    server = server_context(TlsConfig(paths["cert"], paths["key"]))
    _, _, received = await handshake(server, client_context(ca=str(other)))
    assert received == b""


async def test_tls_older_than_1_2_is_refused(ca: trustme.CA, tmp_path: Path) -> None:
    paths = files(ca, tmp_path)
    server = server_context(TlsConfig(paths["cert"], paths["key"]))
    assert server.minimum_version is ssl.TLSVersion.TLSv1_2
    client = client_context(ca=paths["ca"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client.minimum_version = ssl.TLSVersion.TLSv1
        client.maximum_version = ssl.TLSVersion.TLSv1_1
    client.set_ciphers("DEFAULT:@SECLEVEL=0")
    _, error, received = await handshake(server, client)
    assert received == b"" and error is not None
    assert "UNSUPPORTED_PROTOCOL" in repr(error.__cause__)  # the server refused the version


async def test_client_certificate_is_required_with_a_client_ca(
    ca: trustme.CA, tmp_path: Path
) -> None:
    paths = files(ca, tmp_path)
    server = server_context(TlsConfig(paths["cert"], paths["key"], client_ca=paths["ca"]))
    identity, error, received = await handshake(server, client_context(ca=paths["ca"]))
    assert identity is None and error is not None and received == b""
    identity, error, received = await handshake(
        server, client_context(ca=paths["ca"], cert=paths["ccert"])
    )
    assert error is None and received == b"hello"
    assert identity is not None and identity["subject_cn"] == "ci-runner"
    assert len(identity["sha256"]) == 64


@pytest.mark.parametrize("missing", ["cert", "key", "client_ca"])
def test_a_missing_or_bad_file_stops_the_start_naming_it(
    ca: trustme.CA, tmp_path: Path, missing: str
) -> None:
    paths = files(ca, tmp_path)
    config = {"cert": paths["cert"], "key": paths["key"], "client_ca": paths["ca"]}
    config[missing] = str(tmp_path / "absent.pem")
    with pytest.raises(TlsConfigError, match=r"absent\.pem"):
        server_context(TlsConfig(**config))
    Path(tmp_path / "garbage.pem").write_text("not a pem")
    config[missing] = str(tmp_path / "garbage.pem")
    with pytest.raises(TlsConfigError, match=r"garbage\.pem"):
        server_context(TlsConfig(**config))


def test_cert_and_key_are_required_together() -> None:
    with pytest.raises(ValueError, match="tls_key"):
        TlsConfig("cert.pem", "")
