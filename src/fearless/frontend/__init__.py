"""Python source -> AST -> checked, typed IR (shared machinery; SIMT entry in `kernel.py`)."""
