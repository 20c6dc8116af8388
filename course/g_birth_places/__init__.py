"""Assignment G (what a pretrained model knows): checks, character data, fine-tuning, checkpoint."""
