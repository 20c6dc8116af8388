"""The notebook side of the course: everything a notebook imports, and nothing else.

This package runs inside the student's kernel. It holds the helpers the test cells call
(:mod:`course.testcells`, :mod:`course.guard`), plots, widgets, the shipped data, the language
model training loop shared by D and E (:mod:`course.training`), and one subpackage per assignment
(``course/a_masks/`` ... ``course/f_attention_exploration/``, mirroring ``source/`` and ``demo/``)
with that assignment's named-mistake checks and helpers.

It holds no graded answer of any assignment, and never imports nbgrader or the grader
(``grader/``, the ``course`` command): tests check both.
"""
