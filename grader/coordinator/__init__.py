"""Grading a class: ``course release``, ``course autograde`` (N students at a time, or on a Dask
cluster), one submission graded in a scratch course by one ``nbgrader autograde`` process within
its limits, the judge's verdicts applied and the scores merged into the course gradebook, then
``course feedback`` and ``course grades``; the demo class and the submissions built from short
descriptions; ``course lab`` (formgrader, for the hand grades). :mod:`~grader.coordinator.pipeline`
is its front door, one function per step. It imports the books (:mod:`grader.books`) and the
warm workers below it; the term, the class report and the command line call it from above."""
