"""A term with a learning management system (Canvas or Moodle).

- :mod:`grader.lms.archive`: an LMS download (a zip) checked and extracted with nbgrader's
  ``ExtractorPlugin``.
- :mod:`grader.lms.names`: what each LMS writes in a file name (nbgrader
  ``FileNameCollectorPlugin`` subclasses).
- :mod:`grader.lms.worksheet`: Moodle's grading worksheet, in the teacher's language and zone.
- :mod:`grader.lms.collect`: ``course collect``, each student's notebook into ``submitted/``.
- :mod:`grader.lms.export`: ``course grades --lms``, nbgrader export plugins in the columns each
  LMS imports.
- :mod:`grader.lms.fill`: ``course grades --lms --gradebook``, the LMS's own gradebook export
  filled in for import as it is.
- :mod:`grader.lms.feedback_zip`: ``course feedback --zip``, the feedback named for upload.
"""

LMS_NAMES = ("canvas", "moodle")
