"""nbgrader configuration of the course (read by nbgrader and by the `course` command)."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "transformers"
c.CourseDirectory.root = HERE
# The gradebook: sqlite next to this file unless COURSE_DB names another database URL.
c.CourseDirectory.db_url = os.environ.get(
    "COURSE_DB", "sqlite:///" + os.path.join(HERE, "gradebook.db")
)

# Seconds a cell may run while grading; a longer cell fails (and the others go on).
c.ExecutePreprocessor.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "120"))
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "120"))
c.Execute.interrupt_on_timeout = True

# Lines on stderr that are noise, not student errors (kept out of the feedback).
c.ClearOutput.remove_metadata_fields = ["collapsed", "scrolled"]

# The exchange folder for nbgrader's release/fetch/submit; created by `make setup`.
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", os.path.join(HERE, ".exchange"))

# Keep outputs of a runaway cell within bounds in the autograded copy.
c.LimitOutput.max_lines = 500
c.LimitOutput.max_traceback = 100
