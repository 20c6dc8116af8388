"""The LMSs, one module each (the module's name is the LMS's ``--lms`` name)."""
