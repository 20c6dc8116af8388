"""``python -m judge``: answer one JSON request per line on stdin, one JSON reply per line.

Request: ``{"assignment": ..., "seed": ..., "path": ...}``. Reply: ``{"verdicts": {cell: reason
or null}}``, or ``{"refused": reason}`` when the file cannot be read safely.
"""

from __future__ import annotations

import json
import sys

from judge import core


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            observations = core.load(request["path"])
            reply: dict = {
                "verdicts": core.verdicts(request["assignment"], request["seed"], observations)
            }
        except core.Refused as error:
            reply = {"refused": str(error)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
