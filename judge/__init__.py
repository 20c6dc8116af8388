"""The trusted judge: decides each test cell's verdict where no student code runs.

The grader starts ``python -m judge`` once per grading run, outside the sandbox. For each graded
notebook it reads the file of observations that :mod:`course.verify` wrote in the student's
kernel (tensors and plain values, loaded with ``torch.load(weights_only=True)``: no code from the
file runs), draws the same secret inputs, and checks every item against the course's reference
(``judge/<assignment>.py``). The grader compares these verdicts with the points the notebook's
own test cells gave: a test cell that passed in the kernel but fails here flags the notebook.

This package is never visible to the student's kernel (the sandbox mounts ``course/`` only).
"""
