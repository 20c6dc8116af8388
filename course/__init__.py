"""Transformers, from the mask to pretraining: the course package."""
