"""Kernels that talk over private Unix sockets instead of TCP ports.

Grading starts many kernels at once. Over TCP, jupyter_client chooses free ports and the
kernel binds them a moment later; when two kernels start together they can race for the same
ports, and a client may end up waiting forever for a reply that went elsewhere. With the
``ipc`` transport each kernel gets its own socket files, named here after a fresh random id, so
no two kernels can meet. nbgrader and ``course check`` use this class (see nbgrader_config.py).
"""

from __future__ import annotations

import os
import tempfile
import uuid

from jupyter_client.manager import AsyncKernelManager
from traitlets import default


class IsolatedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager on the ipc transport with a unique socket path per kernel."""

    @default("transport")
    def _default_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _default_ip(self) -> str:
        if self.transport != "ipc":
            return super()._ip_default()
        return os.path.join(tempfile.gettempdir(), f"course-kernel-{uuid.uuid4().hex[:16]}")
