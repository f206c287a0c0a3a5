"""The head lab: what each attention head does and how much it matters, over a test set.

Reproduces two papers on the checkpoint at hand: Voita et al. 2019, "Analyzing Multi-Head
Self-Attention: Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned" (ACL; head
confidence, positional and rare-word roles) and Michel et al. 2019, "Are Sixteen Heads Really
Better than One?" (NeurIPS; gradient importance with per-layer l2 normalisation, single-head
removal, pruning curves). Modules: sentences (the set and its two passes), stats, roles,
importance, pruning, job (one cancellable run -> JSON), report (tables); `python -m explorer heads`.
"""
