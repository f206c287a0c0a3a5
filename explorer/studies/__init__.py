"""The studies wing: the analyses that measure a checkpoint over sentences, side by side.

common/ is the base every analysis stands on (the held-out sentence set, the gradient path, activations
kept as tensors, the result file, a study's command line, the run context); each other folder is one
analysis (heads, align, contributions, lens, patching, contrastive, grounding) and imports only common/
and the floors below the studies, never another analysis (contributions may read align's aligners:
its alignment scorecard scores ALTI+ with them). tests/unit/test_layout.py holds the rule.
"""
