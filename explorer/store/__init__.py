"""Where things live on disk: the only code that knows file names (atomic writes, the checkpoint format, the checkpoint
catalog, where runs live and the run-directory layout with its readers, metrics as curves, shipping)."""
