"""The private code of jupyter_client, nbclient, nbconvert and nbgrader that the grader relies on.

The grader's kernel managers and clients (grader/nbgrader/kernels.py,
grader/nbgrader/warm_kernels.py) and its executor (grader/nbgrader/execute_keeping_points.py)
override private methods of these libraries and call others; their versions are pinned in
constraints.txt. Each such method is pinned here by its signature and a hash of its source, so that
a new version is taken only after someone has read what changed.

When a test below fails after a version change: read the new upstream code of the method it
names, check the grader's override or call (the file it names) against it and fix that if
needed, then put the new signature and hash (printed in the message) into PINNED.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import grader

REPO = Path(__file__).resolve().parents[1]
LIBRARIES = ("jupyter_client", "nbclient", "nbconvert", "nbgrader")

# "module:Class.method" -> (signature, first 16 hex digits of the sha256 of its source, where
# the grader uses it). Versions: jupyter_client 8.10.0, nbclient 0.11.0, nbconvert 7.17.2,
# nbgrader 0.9.6 (constraints.txt).
PINNED: dict[str, tuple[str, str, str]] = {
    "jupyter_client.client:KernelClient._async_wait_for_ready": (
        "(self, timeout: float | None = None) -> None",
        "0d732ad86fea3115",
        "overridden by grader/nbgrader/kernels.py PromptKernelClient",
    ),
    "jupyter_client.client:KernelClient._async_is_alive": (
        "(self) -> bool",
        "50dc3f63d16bbd9d",
        "called by grader/nbgrader/kernels.py PromptKernelClient._async_wait_for_ready",
    ),
    "jupyter_client.client:KernelClient._handle_kernel_info_reply": (
        "(self, msg: Dict[str, Any]) -> None",
        "0ccf6064c6489923",
        "called by grader/nbgrader/kernels.py PromptKernelClient._async_wait_for_ready",
    ),
    "jupyter_client.manager:KernelManager._async_wait": (
        "(self, pollinterval: float = 0.1) -> None",
        "574593dddfda8169",
        "overridden by grader/nbgrader/kernels.py IsolatedKernelManager",
    ),
    "jupyter_client.manager:KernelManager._async_cleanup_resources": (
        "(self, restart: bool = False) -> None",
        "452cfe631cd012d2",
        "overridden by grader/nbgrader/kernels.py SandboxedKernelManager",
    ),
    "jupyter_client.manager:KernelManager._async_kill_kernel": (
        "(self, restart: bool = False) -> None",
        "9850bc22c85871db",
        "overridden by grader/nbgrader/warm_kernels.py WarmKernelManager",
    ),
    "jupyter_client.manager:KernelManager._async_launch_kernel": (
        "(self, kernel_cmd: List[str], **kw: Any) -> None",
        "5ba0dfe7cf7e85aa",
        "replaced by grader/nbgrader/warm_kernels.py WarmKernelManager (the zygote forks the "
        "kernel)",
    ),
    "jupyter_client.manager:KernelManager._async_pre_start_kernel": (
        "(self, *, transport_encryption: str | None = None, **kw: Any) "
        "-> Tuple[List[str], Dict[str, Any]]",
        "0ad304c9143e3bfd",
        "sets _launch_args, read by grader/nbgrader/kernels.py "
        "SandboxedKernelManager.format_kernel_cmd",
    ),
    "jupyter_client.manager:KernelManager._async_start_kernel": (
        "(self, **kw: Any) -> None",
        "05b13d23766bc55e",
        "calls format_kernel_cmd, then _async_launch_kernel: both overridden in "
        "grader/nbgrader/warm_kernels.py",
    ),
    "jupyter_client.connect:ConnectionFileMixin._ip_default": (
        "(self) -> 'str'",
        "1344af286bb4b1ef",
        "called by grader/nbgrader/kernels.py IsolatedKernelManager._default_ip (tcp transport)",
    ),
    "jupyter_client.connect:ConnectionFileMixin._reconcile_connection_info": (
        "(self, info: 'KernelConnectionInfo') -> 'None'",
        "5392d13edc8b96ab",
        "called by grader/nbgrader/warm_kernels.py WarmKernelManager._async_launch_kernel",
    ),
    "jupyter_client.provisioning.local_provisioner:LocalProvisioner": (
        "class",
        "485bc5c2221b3d0a",
        "grader/nbgrader/warm_kernels.py sets its process, pid and pgid: WarmProcess stands in for "
        "its Popen",
    ),
    "nbclient.client:NotebookClient._async_handle_timeout": (
        "(self, timeout: 'int', cell: 'NotebookNode | None' = None) -> 'None | dict[str, t.Any]'",
        "27d6db41082b053f",
        "overridden by grader/nbgrader/execute_keeping_points.py ExecuteKeepingPoints",
    ),
    "nbconvert.preprocessors.execute:ExecutePreprocessor._check_assign_resources": (
        "(self, resources)",
        "63d0e47180730b5f",
        "called by grader/nbgrader/execute_keeping_points.py ExecuteKeepingPoints.preprocess",
    ),
    "nbconvert.preprocessors.execute:ExecutePreprocessor.preprocess": (
        "(self, nb: 'NotebookNode', resources: 't.Any' = None, km: 'KernelManager | None' = "
        "None) -> 'tuple[NotebookNode, dict[str, t.Any]]'",
        "58beeaafc496ae5f",
        "re-implemented by grader/nbgrader/execute_keeping_points.py "
        "ExecuteKeepingPoints.preprocess",
    ),
    "nbgrader.preprocessors.clearhiddentests:ClearHiddenTests._remove_hidden_test_region": (
        "(self, cell: nbformat.notebooknode.NotebookNode) -> bool",
        "68ef91dd19232924",
        "called by grader/coordinator/feedback.py HideHiddenTests",
    ),
}


def _resolve(key: str) -> object:
    module, qualname = key.split(":")
    found: object = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def _fingerprint(found: object) -> tuple[str, str]:
    signature = "class" if inspect.isclass(found) else str(inspect.signature(found))  # type: ignore[arg-type]
    digest = hashlib.sha256(inspect.getsource(found).encode()).hexdigest()[:16]  # type: ignore[arg-type]
    return signature, digest


@pytest.mark.parametrize("key", sorted(PINNED))
def test_private_code_we_rely_on_has_not_changed(key: str) -> None:
    signature, digest, where = PINNED[key]
    library = key.split(".")[0]
    version = importlib.metadata.version(library.replace("_", "-"))
    try:
        found = _resolve(key)
    except AttributeError:
        pytest.fail(f"{key} is gone in {library} {version} ({where}): rewrite our side")
    assert _fingerprint(found) == (signature, digest), (
        f"{key} changed in {library} {version} ({where}). Read the new upstream code, check "
        f"the grader's side against it, then pin {_fingerprint(found)} in "
        "tests/test_private_apis.py"
    )


def test_async_client_still_binds_wait_for_ready_to_the_private_method() -> None:
    """PromptKernelClient assigns ``wait_for_ready`` itself because AsyncKernelClient binds
    that public name to KernelClient's private method when the class is made."""
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.client import KernelClient

    from grader.nbgrader.kernels import PromptKernelClient

    assert AsyncKernelClient.wait_for_ready is KernelClient._async_wait_for_ready
    assert PromptKernelClient.wait_for_ready is PromptKernelClient._async_wait_for_ready


def _grader_classes() -> list[type]:
    classes = []
    for info in pkgutil.walk_packages(grader.__path__, "grader."):
        module = importlib.import_module(info.name)
        classes += [
            c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == info.name
        ]
    return classes


def _library_bases(cls: type) -> list[type]:
    return [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] in LIBRARIES]


def _key(owner: type, name: str) -> str:
    return f"{owner.__module__}:{owner.__qualname__}.{name}"


def _is_method(value: object) -> bool:
    return inspect.isfunction(value) or isinstance(value, (property, staticmethod, classmethod))


def test_every_private_method_the_grader_overrides_is_pinned() -> None:
    """A grader class that overrides a private method of a library base: the base's method
    must be in PINNED (scan of every class of grader/)."""
    unpinned = []
    for cls in _grader_classes():
        bases = _library_bases(cls)
        for name, value in vars(cls).items():
            if not name.startswith("_") or name.startswith("__") or not _is_method(value):
                continue
            owners = [b for b in bases if name in vars(b)]
            if owners and _key(owners[0], name) not in PINNED:
                unpinned.append(
                    f"{cls.__module__}.{cls.__qualname__}.{name} overrides " + _key(owners[0], name)
                )
    assert not unpinned, "pin these in tests/test_private_apis.py: " + "; ".join(unpinned)


def test_every_private_name_the_grader_uses_is_pinned() -> None:
    """A private name of a library class (``._name``) written in grader/, course/ or judge/:
    the class that defines it must be in PINNED (or the class itself, for its attributes)."""
    libraries = {b for cls in _grader_classes() for b in _library_bases(cls)}
    used = {
        (name, path.relative_to(REPO).as_posix())
        for folder in ("grader", "course", "judge")
        for path in sorted((REPO / folder).rglob("*.py"))
        for name in re.findall(r"\.(_[a-z]\w*)", path.read_text())
    }
    pinned_classes = {key.split(".")[0] for key in PINNED if "." not in key.split(":")[1]}
    unpinned = []
    for name, path in sorted(used):
        owners = sorted(_key(b, name) for b in libraries if name in vars(b))
        if (
            owners
            and not any(o in PINNED or o.rsplit(".", 1)[0] in pinned_classes for o in owners)
            and not _attribute_set_by_pinned(name)
        ):
            unpinned.append(f"{name} ({path}; defined by {', '.join(owners)})")
    assert not unpinned, "pin these in tests/test_private_apis.py: " + "; ".join(unpinned)


def _attribute_set_by_pinned(name: str) -> bool:
    """A private attribute (not a method) that a pinned method sets: ``_launch_args``."""
    return any(
        f"self.{name} =" in inspect.getsource(_resolve(key))
        for key in PINNED
        if not inspect.isclass(_resolve(key))
    )
