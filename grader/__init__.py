"""The grader side of the course: the ``course`` command over nbgrader.

Release, autograde (one sandboxed process per submission), the tampering scan, the grading
report, feedback without hidden tests, the students' self-check, the demo class and the
submissions built from descriptions. It runs in the instructor's process, never inside a
student's kernel, and never imports torch or the notebook package ``course``: tests check both.
"""
