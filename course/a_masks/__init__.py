"""Assignment A (masks and positions): the checks of its visible tests."""
