"""``python -m judge``: answer one request line on stdin with one reply line on stdout.

The lines' format is the verification contract's (:mod:`course.contract`): a request names
the assignment, the seed and the observations' path; the reply gives every test cell's verdict,
or why the file was refused.

``python -m judge --serve SOCKET`` (the kept warm workers, :mod:`grader.warm.service`) imports torch
and every assignment's judge once, then forks a fresh judge for each connection on the Unix socket
``SOCKET``, which answers that connection's lines as the process above answers its stdin: what one
grading run's judge read or did is gone with it, as with a process of its own.
"""

from __future__ import annotations

import os
import pkgutil
import select
import signal
import socket
import sys
from typing import TextIO

import judge
from course import contract
from judge import core


def answer(requests: TextIO, replies: TextIO) -> None:
    """One reply line on ``replies`` for each request line read from ``requests``."""
    for line in requests:
        assignment, seed, path = contract.read_request(line)
        try:
            observations = core.load(path)
            reply = contract.verdicts_line(
                *core.verdicts_and_mistakes(assignment, seed, observations)
            )
        except core.Refused as error:
            reply = contract.refused_line(str(error))
        replies.write(reply)
        replies.flush()


def serve(path: str) -> None:
    """Preload, then fork a judge per connection on ``path`` until the parent process ends."""
    for module in pkgutil.iter_modules(judge.__path__):
        __import__(f"judge.{module.name}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(16)
    os.rename(path + ".new", path)  # named once it listens: a client never finds it deaf
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forked judges are reaped by the kernel
    parent = os.getppid()
    while os.getppid() == parent:  # ends with the process that started it
        if select.select([listener], [], [], 0.5)[0]:
            connection = listener.accept()[0]
            if os.fork() == 0:
                listener.close()
                _judge_connection(connection)
            connection.close()


def _judge_connection(connection: socket.socket) -> None:
    """The forked judge: answer the connection's lines, then end. Never returns."""
    code = 0
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        with connection.makefile("r") as requests, connection.makefile("w") as replies:
            answer(requests, replies)
    except BaseException:  # noqa: BLE001 - the connection's end: the grader sees it closed
        code = 1
    os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        answer(sys.stdin, sys.stdout)
    # Every reply is written and flushed: end at once, without the interpreter's teardown of
    # torch (a third of a second that the grader would wait for at the end of each run).
    os._exit(0)
