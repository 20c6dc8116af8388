"""The ``course`` command line: the top floor of the grader; it parses the arguments and calls
the package that does the job (grading a class, :mod:`grader.coordinator`; a term,
:mod:`grader.term`; the LMSs, :mod:`grader.lms`; the class report, :mod:`grader.report`;
self-study in a clone, :mod:`grader.selfstudy`), and prints what comes back. It holds no logic
of its own; no package imports it. :mod:`~grader.command.cli` is the parser and the entry point
(``course = "grader.command.cli:main"`` in pyproject.toml), :mod:`~grader.command.cli_term` the
sub-commands of a term."""
