"""The one error the checkpoint store raises (its own module so store/ modules can share it)."""


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message names the file and the problem."""
