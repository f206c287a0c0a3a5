"""Why this translation and not another: contrastive attribution at a step of decoding (foils,
attribution), where a reference fell off the beam (fall), exact search (exact) and the beam-size curve
over a test set with its search errors (curve, job); `python -m explorer search` (`python -m
explorer search`). Methods and papers: docs/SEARCH.md."""
