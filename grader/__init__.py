"""The ``course`` command: the instructor's pipeline over nbgrader, and the students' self-check.

One package per process, and the command's own process in floors, so that what runs where and
what may call what can be read from the folder:

- the ``course`` command's own process, each floor importing only the floors below it:

  - :mod:`grader.command`, on top: the command line; it parses and calls, nothing more.
  - :mod:`grader.term` (a term: the address, a fix mid-term, final grades, the public copy,
    forgetting a student), :mod:`grader.report` (the class report) and
    :mod:`grader.selfstudy` (self-study in a clone: the hidden tests, progress).
  - :mod:`grader.coordinator` (grading a class N at a time or on Dask, one submission in a
    scratch course by one ``nbgrader autograde`` process, release, feedback, the grade table,
    the demo class) and :mod:`grader.lms` (Canvas, Moodle, Blackboard, Brightspace).
  - :mod:`grader.books`: the gradebook, the due dates, nbgrader's API on the course.
- :mod:`grader.nbgrader`: what nbgrader loads in its own process, by the names
  ``nbgrader_config.py`` gives: the preprocessors, the kernel managers, the kernel's observation and
  nbgrader's entry point. The coordinator names these, never imports them.
- :mod:`grader.warm`: warm workers: the zygote inside the sandbox, the pool of kernels forked
  from it, the nbgrader fork server, the workers kept between runs.
- :mod:`grader.sandbox`: what a graded kernel may see and use: bubblewrap, resource limits,
  cgroups.
- :mod:`grader.shared`: what more than one process uses: the course folder, notebooks, limits,
  and the rule after a graded run (the judge's verdicts, the quota, the tampering scan, the report).

The grader runs outside every student's kernel and never imports torch or the notebook package
``course`` (the contract and ``course check``'s runner aside); it has no import cycle, and no
package imports another except as ``MAY_IMPORT`` in ``tests/test_layout.py`` allows.
"""
