"""The course's books, below every package of the ``course`` command that reads or writes them:
the gradebook on any database nbgrader supports and the workers' private copies of it
(:mod:`~grader.books.gradebook`), the due dates and extensions nbgrader keeps there
(:mod:`~grader.books.deadlines`), and nbgrader's Python API on the course folder
(:mod:`~grader.books.nbgrader_api`). Grading a class, the term, the LMSs and the class report all
import these; they import only :mod:`grader.shared`, so no import runs back up."""
