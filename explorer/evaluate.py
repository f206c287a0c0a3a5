"""`python -m explorer evaluate`: the command line of explorer.evaluation.scores (kept here so the command stays short)."""
import sys

from explorer.evaluation.command import main

if __name__ == "__main__":
    sys.exit(main())
