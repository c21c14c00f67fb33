"""SIMT passes, one per module, each `run(fn, options) -> None`; the order is in pipeline.py."""
