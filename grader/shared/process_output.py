"""What an ``nbgrader autograde`` process prints, read to its end but kept bounded.

A kernel's own standard output and error are its nbgrader process's (a subprocess's output, or
``os.write(sys.stdout.fileno(), ...)``, reaches them besides the notebook), so a submission can
print without end there: the grader once kept all of it in memory (600 MB printed, 1.8 GB held by
the grading process). The log is read only for why a run failed (its last lines, see
:func:`grader.coordinator.nbgrader_run.first_error`): its first :data:`HEAD` and last :data:`TAIL`
bytes are kept, and how much was left out between them is said.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections import deque

HEAD = 64 * 1024
TAIL = 1024 * 1024


def read_all(fd: int, timeout: float | None = None) -> str:
    """Read ``fd`` to its end within ``timeout`` seconds (``subprocess.TimeoutExpired`` after); its
    first :data:`HEAD` and last :data:`TAIL` bytes, decoded."""
    end = time.monotonic() + (timeout if timeout is not None else 1e9)
    head, tail, kept, dropped = b"", deque(), 0, 0
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            raise subprocess.TimeoutExpired("nbgrader", timeout or 0)
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        if len(head) < HEAD:
            head, chunk = head + chunk[: HEAD - len(head)], chunk[HEAD - len(head) :]
        tail.append(chunk)
        kept += len(chunk)
        while kept - len(tail[0]) >= TAIL:  # the oldest chunk is not needed for the last TAIL
            kept -= len(tail[0])
            dropped += len(tail.popleft())
    gap = f"\n[... {dropped} bytes of output left out ...]\n".encode() if dropped else b""
    return (head + gap + b"".join(tail)).decode(errors="replace")


class BoundedPopen(subprocess.Popen):
    """A Popen whose output (``stdout=PIPE``, bytes) is read as :func:`read_all` reads it."""

    def communicate(self, input: object = None, timeout: float | None = None) -> tuple[str, None]:
        log = (
            ""
            if self.stdout is None or self.stdout.closed
            else read_all(self.stdout.fileno(), timeout)
        )
        if self.stdout is not None:
            self.stdout.close()
        self.wait()
        return log, None

    def close(self) -> None:
        """Drop the output pipe (the process was killed, and another one may hold it open)."""
        if self.stdout is not None:
            self.stdout.close()
        self.wait()
