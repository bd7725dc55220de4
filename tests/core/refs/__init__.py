"""Checkpoints saved under other pydantic-graph releases, and the script that saves them."""
