"""Assignment C (counting parameters): the checks of its tests, and the groups it plots."""
