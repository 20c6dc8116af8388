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

# Where students install the course from: your public copy's git address, the student wheel's URL,
# or "clone" (notebooks used where the course is installed). `course address URL` rewrites this
# line; `course release` refuses while it is empty (docs/term.md).
c.Course.student_install = ""

# Late submissions: nbgrader's penalty, applied when the grades go out (`course grades --lms`):
# "none" (lateness is listed, no points taken), "zero" (a late notebook scores 0), or your own
# plugin (nbgrader's docs: "Late submission plugin").
c.LateSubmissionPlugin.penalty_method = "none"

# Seconds a cell may run while grading, at most: the limit in force is derived per assignment from
# its reference run (grader/shared/limits.py: 10 x its slowest cell, at least 30 s); a longer cell
# is interrupted (and the others go on).
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "120"))
c.Execute.interrupt_on_timeout = True
# Seconds to wait for the last outputs of a finished cell (4 s fails on a busy machine).
c.Execute.iopub_timeout = 60
# Every graded kernel runs in the bubblewrap sandbox, under the limits below, on private Unix
# sockets (grader/nbgrader/kernels.py): `course autograde`, plain `nbgrader autograde` and
# formgrader's Autograde button alike. Where bubblewrap is missing, nothing is graded; only `course
# autograde --unsafe-no-sandbox` grades without it (and marks every notebook).
c.Execute.kernel_manager_class = "grader.nbgrader.kernels.SandboxedKernelManager"

# Sanitizing a submission before it runs: nbgrader's default steps, with DeduplicateIds (which fails
# the whole submission over one copied graded cell) replaced by DropDuplicateCells (keeps the first
# copy, removes the others, logs a note for the report; see
# grader/nbgrader/execute_keeping_points.py).
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "grader.nbgrader.drop_duplicate_cells.DropDuplicateCells",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Running a submission: nbgrader's default steps, with Execute replaced by ExecuteKeepingPoints (a
# kernel that dies keeps the points of the cells that ran before it; the time limits derived from
# the reference run; the kernel observed for the trusted judge:
# grader/nbgrader/execute_keeping_points.py), and the course's steps around it
# (grader/nbgrader/leave_no_links.py and verify_points.py): LeaveNoLinks removes links and other
# special files from the graded folder before the kernel runs and before nbgrader sets the folder's
# permissions (which follows links); VerifyPoints applies the disk quota, the judge's verdicts and
# the tampering scan to the gradebook and writes the grading report's line, so that plain `nbgrader
# autograde` and formgrader's button grade as `course autograde` does.
c.Autograde.autograde_preprocessors = [
    "grader.nbgrader.leave_no_links.LeaveNoLinks",
    "grader.nbgrader.execute_keeping_points.ExecuteKeepingPoints",
    "grader.nbgrader.leave_no_links.LeaveNoLinks",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
    "grader.nbgrader.verify_points.VerifyPoints",
]

# Feedback never shows a hidden test, in a cell or in a traceback (grader/coordinator/feedback.py),
# whether it is made by `course feedback`, `nbgrader generate_feedback` or formgrader's button.
c.GenerateFeedback.preprocessors = [
    "grader.coordinator.feedback.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Limits on one submission while it is graded (grader/shared/limits.py says what is enforced where).
c.Limits.submission_seconds = int(os.environ.get("COURSE_SUBMISSION_SECONDS", "900"))
c.Limits.memory_mb = int(os.environ.get("COURSE_MEMORY_MB", "8192"))
c.Limits.file_size_mb = 512
c.Limits.processes = 512
# Disk quota of a submission (MB): what its folder may hold after grading, and what a cluster worker
# sends back; the largest files over it are removed, the points kept (grader/shared/quota.py).
c.Limits.disk_mb = int(os.environ.get("COURSE_DISK_MB", "100"))

# The exchange folder for nbgrader's release/fetch/submit; created by `make setup`.
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", os.path.join(HERE, ".exchange"))

# Keep outputs of a runaway cell within bounds in the autograded copy.
c.LimitOutput.max_lines = 500
c.LimitOutput.max_traceback = 100
