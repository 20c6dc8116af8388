"""``python -m course check NOTEBOOK``: the student part's ``course`` command, :mod:`course.cli`."""

import sys

from course.cli import main

sys.exit(main())
