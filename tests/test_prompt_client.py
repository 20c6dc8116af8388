"""grader.nbgrader.kernels.PromptKernelClient: ready as soon as the kernel answered, late answers
too.

The channels here are scripted: what a kernel sends, in order, and when nothing is there (the
client's wait runs out). No kernel is started."""

from __future__ import annotations

from pathlib import Path
from queue import Empty

import pytest
import zmq
from jupyter_client.connect import write_connection_file

from grader.nbgrader.kernels import RECONNECT_MS, PromptKernelClient
from tests.conftest import run_coroutine

TIMEOUT = object()  # a scripted wait that runs out


class Channel:
    def __init__(self, script: list) -> None:
        self.script = script

    async def get_msg(self, timeout: float | None = None) -> dict:
        if not self.script or self.script[0] is TIMEOUT:
            if self.script:
                self.script.pop(0)
            raise Empty
        return self.script.pop(0)


def message(kind: str, parent: str, state: str = "") -> dict:
    content = {"execution_state": state} if state else {"status": "ok"}
    return {"msg_type": kind, "parent_header": {"msg_id": parent}, "content": content}


class Scripted(PromptKernelClient):
    def __init__(self, shell: list, iopub: list, alive: bool = True) -> None:
        self.requests: list[str] = []
        self.ready_with: dict | None = None
        self.alive = alive
        self._shell, self._iopub = Channel(shell), Channel(iopub)

    shell_channel = property(lambda self: self._shell)
    iopub_channel = property(lambda self: self._iopub)

    def kernel_info(self) -> str:
        self.requests.append(f"r{len(self.requests) + 1}")
        return self.requests[-1]

    async def _async_is_alive(self) -> bool:
        return self.alive

    def _handle_kernel_info_reply(self, msg: dict) -> None:
        self.ready_with = msg


def test_ready_at_the_first_answer_on_both_channels() -> None:
    client = Scripted(
        shell=[message("kernel_info_reply", "r1")],
        iopub=[message("status", "r1", "busy"), message("status", "r1", "idle")],
    )
    run_coroutine(client.wait_for_ready(timeout=10))
    assert client.requests == ["r1"] and client.ready_with["parent_header"]["msg_id"] == "r1"


def test_a_late_answer_to_an_earlier_request_counts() -> None:
    """On a loaded machine the reply to the first request comes after the second was sent;
    waiting for the second's own reply would stay one behind for ever."""
    client = Scripted(
        shell=[TIMEOUT, message("kernel_info_reply", "r1"), message("kernel_info_reply", "r2")],
        iopub=[message("status", "r1", "busy"), message("status", "r1", "idle")],
    )
    run_coroutine(client.wait_for_ready(timeout=10))
    assert client.requests == ["r1", "r2"] and client.ready_with["parent_header"]["msg_id"] == "r1"


def test_iopub_not_connected_yet_asks_again() -> None:
    """The first request's status was published before IOPub was connected: lost."""
    client = Scripted(
        shell=[message("kernel_info_reply", "r1"), message("kernel_info_reply", "r2")],
        iopub=[TIMEOUT, message("status", "r2", "busy"), message("status", "r2", "idle")],
    )
    run_coroutine(client.wait_for_ready(timeout=10))
    assert client.requests == ["r1", "r2"] and client.ready_with["parent_header"]["msg_id"] == "r2"


def test_a_dead_kernel_is_said() -> None:
    client = Scripted(shell=[TIMEOUT], iopub=[], alive=False)
    with pytest.raises(RuntimeError, match="died before replying"):
        run_coroutine(client.wait_for_ready(timeout=10))


def test_channels_try_a_kernel_socket_not_yet_bound_every_10_ms(tmp_path: Path) -> None:
    """The client connects while the kernel starts: a missing socket is tried again every
    10 ms, not ZeroMQ's 100 ms, so that a kernel is answered as soon as it has bound."""
    info = write_connection_file(str(tmp_path / "kernel.json"), transport="ipc")[1]
    info["ip"] = str(tmp_path / "no-kernel-yet")  # nothing is bound there
    client = PromptKernelClient()
    client.load_connection_info(info)
    client.start_channels(hb=False)  # the heartbeat's thread is not what is checked
    try:
        for channel in (client.shell_channel, client.iopub_channel, client.stdin_channel):
            assert channel.socket.getsockopt(zmq.RECONNECT_IVL) == RECONNECT_MS == 10
    finally:
        client.stop_channels()
