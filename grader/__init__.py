"""The ``course`` command: the instructor's pipeline over nbgrader, and the students' self-check.

:mod:`grader.cli` parses the command line; :mod:`grader.pipeline` gathers the pipeline's steps,
one module each: release (:mod:`grader.release`), autograde (:mod:`grader.autograde`, on this
machine or on Dask, :mod:`grader.cluster`), feedback (:mod:`grader.feedback`) and the grade
table (:mod:`grader.grade_table`). One submission is graded by :mod:`grader.grading` in a
scratch course (:mod:`grader.scratch`) by one ``nbgrader autograde`` process within limits
(:mod:`grader.nbgrader_run`, :mod:`grader.limits`, :mod:`grader.rlimits`), its kernel in
bubblewrap (:mod:`grader.sandbox`, :mod:`grader.kernels`), then checked by the tampering scan
(:mod:`grader.tampering`) and the trusted judge (:mod:`grader.verification`), its folder held to
the disk quota (:mod:`grader.quota`). ``course check``, which students run on their own
notebooks, is :mod:`grader.check`.

The grader runs outside every student's kernel and never imports torch or the notebook package
``course``; it has no import cycle (``tests/test_layout.py`` checks all three).
"""
