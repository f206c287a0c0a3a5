"""Looking inside a model: hooks (capture, intervene, ablate), the Trace, attention statistics, positional-encoding math."""
