"""The ``course`` command's process: the commands, grading a class (N at a time or on a cluster),
the gradebook, the class report."""
