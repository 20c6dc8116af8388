"""Visible checks of each assignment: properties and named mistakes, never the answer itself.

Each module here serves one assignment's visible test cells. The reference implementations
live in the hidden tests of the instructor's notebooks (``source/``), not in this package.
"""
