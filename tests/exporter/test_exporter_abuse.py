"""The exporter under abuse, on real sockets on 127.0.0.1: a burst of connections queued while the server is busy,
many scrapes at once, a request sent in half and never finished, unknown paths, HEAD and a huge request line.
prometheus-client's defaults listened with a backlog of 5 (54 of 200 scrapes at once timed out), never closed a
half-sent request, and answered the metrics on every path."""

from __future__ import annotations

import concurrent.futures
import select
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.exporter.helpers import scrape, served, two_gpus, write_history
from torchperf_tui.engine.hardware.nvml import Nvml
from torchperf_tui.engine.records.history_file import HistoryFile
from torchperf_tui.exporter.server import ExporterState, make_exporter_server

GENEROUS_S = 60  # what a test waits at most for something that should be immediate: never a threshold


def gpus() -> Nvml:
    return Nvml.open(module=two_gpus())


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "history.jsonl"
    write_history(path)
    return path


def test_a_burst_of_connections_is_queued_while_the_server_is_busy(history):
    """64 connections opened before the server accepts any (as when its threads are all busy): every one is
    queued by the kernel and then answered. With a backlog of 5, the 7th and later were never established."""
    state = ExporterState(gpus(), HistoryFile(history), hostname="box-a", warn=lambda line: None)
    state.refresh(strict=True)
    server = make_exporter_server(state, "127.0.0.1", 0)
    clients = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        for _ in range(64):
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", server.server_port))
            clients.append(client)
        pending, start = list(clients), time.monotonic()
        while pending and time.monotonic() - start < GENEROUS_S / 6:  # established: writable
            _, writable, _ = select.select([], pending, [], GENEROUS_S / 6)
            pending = [c for c in pending if c not in writable]
        assert not pending, f"{len(pending)} of 64 connections not established with the server not yet accepting"
        thread.start()
        for client in clients:
            client.setblocking(True)
            client.settimeout(GENEROUS_S)
            client.sendall(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        for client in clients:
            assert _read_all(client).startswith(b"HTTP/1.0 200 OK")
    finally:
        for client in clients:
            client.close()
        if thread.is_alive():
            server.shutdown()  # waits for serve_forever: only once it runs
        server.server_close()


def test_many_scrapes_at_once_are_all_answered(history):
    with served(gpus(), history) as (_, url):
        with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
            results = list(pool.map(lambda _: scrape(url), range(200)))
    assert len(results) == 200 and all("DCGM_FI_DEV_GPU_UTIL" in samples for samples in results)


def test_a_half_sent_request_is_closed_after_the_read_timeout(history, capfd):
    state = ExporterState(gpus(), HistoryFile(history), hostname="box-a", warn=lambda line: None)
    state.refresh(strict=True)
    server = make_exporter_server(state, "127.0.0.1", 0, read_timeout_s=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        halves = [b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GET /metr", b""]  # no blank line; no line
        clients = [socket.create_connection(("127.0.0.1", server.server_port), timeout=GENEROUS_S) for _ in halves]
        for client, half in zip(clients, halves):
            client.sendall(half)
        for client in clients:
            assert client.recv(1024) == b""  # closed by the server (before the fix: blocked until our timeout)
            client.close()
        # ... and the server goes on answering.
        assert "DCGM_FI_DEV_GPU_UTIL" in scrape(f"http://127.0.0.1:{server.server_port}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err  # a timed-out connection is no error to print


@pytest.mark.parametrize("path", ["/nope", "/metrics/x", "/favicon.ico", "/metricsx", "/../etc/passwd"])
def test_an_unknown_path_is_404(history, path):
    with served(gpus(), history) as (_, url):
        base = url.removesuffix("/metrics")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(base + path, timeout=GENEROUS_S)
    assert caught.value.code == 404 and b"/metrics" in caught.value.read()


def test_the_root_points_to_the_metrics(history):
    with served(gpus(), history) as (_, url):
        base = url.removesuffix("/metrics")
        with urllib.request.urlopen(base + "/", timeout=GENEROUS_S) as response:
            assert response.status == 200 and b"/metrics" in response.read()
        head = urllib.request.Request(base + "/", method="HEAD")
        with urllib.request.urlopen(head, timeout=GENEROUS_S) as response:
            assert response.status == 200 and response.read() == b""
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(urllib.request.Request(base + "/", data=b"x", method="POST"), timeout=GENEROUS_S)
        assert caught.value.code == 405
        assert "DCGM_FI_DEV_GPU_UTIL" in scrape(url + "?x=1")  # a query does not make /metrics another path


def test_a_huge_request_line_is_refused_and_the_server_goes_on(history):
    with served(gpus(), history) as (_, url):
        port = int(url.split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=GENEROUS_S) as client:
            client.sendall(b"GET /" + b"a" * 70_000 + b" HTTP/1.0\r\n\r\n")
            assert _read_all(client).startswith(b"HTTP/1.0 414")
        assert "DCGM_FI_DEV_GPU_UTIL" in scrape(url)


def _read_all(client: socket.socket) -> bytes:
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)
