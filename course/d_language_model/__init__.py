"""Assignment D (a Transformer language model): the checks of its tests, and its baselines."""
