"""What every analysis shares, written once (see docs/DESIGN.md, "Adding an analysis")."""
