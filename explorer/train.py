"""`python -m explorer.train`: the command line of explorer.training.trainer (kept here so the command stays short)."""
import sys

from explorer.training.trainer import main

if __name__ == "__main__":
    sys.exit(main())
