"""`python -m explorer convert`: the command line of explorer.interop.cli (kept here so the command stays short)."""
import sys

from explorer.interop.cli import main

if __name__ == "__main__":
    sys.exit(main())
