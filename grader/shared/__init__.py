"""What more than one of the grader's processes uses: the course folder, notebooks, limits, and the
rule after a graded run (verdicts, quota, tampering, the report)."""
