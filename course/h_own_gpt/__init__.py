"""Assignment H: your own GPT, from the blocks you wrote to the text it writes."""
