"""Prompt templates, one module per node; the LLM engine fills them (the extractive engine needs none)."""
