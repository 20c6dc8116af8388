"""The class report: ``course report ASSIGNMENT``, what a graded class got right and wrong,
gathered from the gradebook and the grading records (:mod:`~grader.report.class_report`),
submissions that look alike or like a published solution (:mod:`~grader.report.similarity`),
and the one HTML page that shows it (:mod:`~grader.report.class_report_html`). It reads what
grading a class (:mod:`grader.coordinator`) wrote and never grades; only the command line
(:mod:`grader.command`) imports it."""
