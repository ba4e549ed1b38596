"""Benchmarks for dsh-tools. Run them with ``nox -s bench`` (or ``python -m benchmarks``)."""
