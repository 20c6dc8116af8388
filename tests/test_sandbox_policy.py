"""The sandbox policy (grader/sandbox/policy.py) is the one source of both sandboxes: bubblewrap's
arguments for a cold kernel and the warm zygote's per-kernel set-up. What a kernel then sees is
compared in tests/test_kernel_sandbox.py; here, the pieces, without starting a kernel."""

from __future__ import annotations

import json

import pytest

from grader.sandbox import bubblewrap
from grader.sandbox.policy import KEYCTL, POLICY, keyctl_number
from grader.warm import kernel_sandbox, wire


def test_bubblewrap_s_arguments_follow_the_policy(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bubblewrap.shutil, "which", lambda name: f"/usr/bin/{name}")
    args = bubblewrap.sandbox_command(["python3", "-m", "k"], str(tmp_path), "/s", [], [], 16)
    pairs = list(zip(args, args[1:], strict=False))
    for path in POLICY.private_tmpfs:
        assert ("--tmpfs", path) in pairs
    for path in POLICY.host_read_only:
        assert ("--ro-bind-try", path) in pairs
    assert ("--bind", str(tmp_path)) in pairs and ("--bind", "/s") in pairs
    assert ("--proc", POLICY.proc) in pairs and ("--cap-drop", "ALL") in pairs
    for name in POLICY.namespaces:
        option = bubblewrap.UNSHARE_OPTIONS[name]
        assert option is None or option in args, name
    assert args.index("--remount-ro") > args.index("--bind")  # after every mount point is made
    assert str(keyctl_number()) in args[args.index("--") + 5]  # the keyring, then the kernel


def test_the_zygote_s_namespaces_are_the_policy_s() -> None:
    kernel_sandbox.POLICY.update(POLICY.for_zygote())
    flags = kernel_sandbox.new_namespaces() | kernel_sandbox.CLONE["user"]
    assert flags == sum(kernel_sandbox.CLONE[n] for n in POLICY.namespaces)


def test_a_machine_without_a_known_keyctl_is_refused_with_what_to_do() -> None:
    assert keyctl_number("x86_64") == 250 and keyctl_number("aarch64") == 219
    with pytest.raises(RuntimeError, match="sparc64.*KEYCTL.*--unsafe-no-sandbox"):
        keyctl_number("sparc64")
    assert len(KEYCTL) >= 7


def test_the_zygote_s_program_bundles_the_wire_before_its_own_code() -> None:
    source = wire.zygote_source()
    compile(source, "zygote", "exec")  # one program: no __future__ import left after the bundle
    assert source.index("_zygote_wire") < source.index("_zygote_kernel_sandbox")
    assert source.index("_zygote_kernel_sandbox") < source.index("def _serve(")


def test_a_start_request_reads_back_as_it_was_sent() -> None:
    start = wire.Start("/w", "/s", "/s/k.json", "python", {"A": "1"}, wire.Limits(1, 2, 3), 16)
    message = json.loads(wire.start_request(start))
    assert message["op"] == wire.START and wire.Start.read(message) == start
    assert wire.statuses(wire.status(wire.PID, 7) + wire.status(wire.READY) + b'["err') == {
        wire.PID: 7,
        wire.READY: "",
    }
