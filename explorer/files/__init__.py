"""The ground floor for files: writes that leave the old or the new thing whole (atomic.py), and paths
a user names on a command line, read or written as untrusted (user_files.py). Imports nothing else
of the library, so every floor above may write files."""
