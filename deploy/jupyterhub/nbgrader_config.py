"""nbgrader settings shared by every user of the hub (students and the instructor).

The hub points each single-user server at this folder (JUPYTER_CONFIG_PATH), so nbgrader's
assignment list (fetch, submit, fetch feedback) finds the course and the shared exchange here.
The instructor's course folder has its own nbgrader_config.py (the repository's), which reads
the same COURSE_EXCHANGE variable, so release and collect use the same exchange.
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "transformers"
# Must exist, be world-writable with the sticky bit (chmod 1777); see README.md here.
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
