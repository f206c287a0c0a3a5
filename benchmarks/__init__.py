"""Benchmarks (not timed tests): `python -m benchmarks <name>` or `python -m benchmarks all`.

Each benchmark is a module here with `main(argv: list[str] | None = None) -> int | None` that
prints its own table; add a module and the dispatcher finds it.
"""
