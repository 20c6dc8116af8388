"""A term: around the grading of each assignment, where the students install the course from
(:mod:`~grader.term.address`), a fix in the middle of the term and its regrade
(:mod:`~grader.term.midterm`), grades that go out only when final (:mod:`~grader.term.final`),
the public copy of a graded class (:mod:`~grader.term.publish`) and a student's data removed
(:mod:`~grader.term.forget`). It sits above grading a class (:mod:`grader.coordinator`) and the
LMSs (:mod:`grader.lms`), which it calls, and below the command line (:mod:`grader.command`)."""
