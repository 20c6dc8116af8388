"""The sandbox of a graded kernel: one policy, bubblewrap's arguments, resource limits and
cgroups."""
