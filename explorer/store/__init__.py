"""Where things live on disk: the only code that knows file names (atomic writes, the checkpoint format, the checkpoint catalog, the run-directory layout, shipping)."""
