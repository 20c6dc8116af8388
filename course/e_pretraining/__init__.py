"""Assignment E (pretraining and fine-tuning): checks, fine-tuning loop, shipped checkpoint."""
