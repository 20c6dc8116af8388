"""Self-study in a clone: the half of it that needs the clone's ``source/``. The
clone's ``course check`` runs the student part's one check (:mod:`course.check`) with the
instructor's hidden tests added and records each exercise (:mod:`~grader.selfstudy.check`,
:mod:`~grader.selfstudy.selfcheck`); ``course progress`` reads those records
(:mod:`~grader.selfstudy.progress`); :mod:`~grader.selfstudy.selfstudy_cells` writes the
self-study cells into a learner's own copy. What a learner's notebook runs, in a clone or with
the student part alone, is in ``course/`` (:mod:`course.selfstudy`). Only the command line
(:mod:`grader.command`) imports this package."""
