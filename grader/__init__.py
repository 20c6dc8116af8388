"""The ``course`` command: the instructor's pipeline over nbgrader, and the students' self-check.

One package per process, so that what runs where can be read from the folder:

- :mod:`grader.coordinator`: the ``course`` command's own process: the commands
  (:mod:`~grader.command.cli`, :mod:`~grader.coordinator.pipeline`), grading a class N at a time
  or on Dask (:mod:`~grader.coordinator.autograde`, :mod:`~grader.coordinator.cluster`), one
  submission in a scratch course by one ``nbgrader autograde`` process
  (:mod:`~grader.coordinator.grading`, :mod:`~grader.coordinator.nbgrader_run`), the gradebook and
  the class report; :mod:`grader.lms` (Canvas and Moodle) is the coordinator's too.
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
``course``; it has no import cycle, and no process's package imports another's except as
``tests/test_layout.py`` allows.
"""
