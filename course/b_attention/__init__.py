"""Assignment B (attention and the Transformer layer): the checks of its visible tests."""
