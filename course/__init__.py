"""The notebook side of the course: everything a notebook imports, and nothing else.

This package runs inside the student's kernel. It holds the helpers the test cells call
(:mod:`course.testcells`, :mod:`course.guard`), plots, widgets, the shipped data, the language
model training loop shared by D and E (:mod:`course.training`), the loading of the shipped
checkpoints (:mod:`course.checkpoints`), the kernel's half of the trusted verification
(:mod:`course.verify`, and :mod:`course.probing`, what every probe shares), and one subpackage
per assignment A to H (``course/a_masks/`` ... ``course/h_own_gpt/``, one per folder of
``source/`` and ``demo/``) with that assignment's named-mistake checks (``checks.py``, and the
topic modules it re-exports), what the trusted judge observes (``probe.py``, with the table of
its test cells) and helpers.

It holds no graded answer of any assignment, and never imports nbgrader or the grader
(``grader/``, the ``course`` command): tests check both, and that no callable of it earns a
graded cell's points.
"""
