"""The ``dsh-tools`` command line's views (``pip install 'dsh-tools[cli]'``).

Imported only by :mod:`dsh_tools.__main__`, one module per command: :mod:`.live_demo` and
:mod:`.bench_view` and :mod:`.replay` need ``rich``; :mod:`.bench` (the measurements, shared
with the repository's ``benchmarks/``) needs nothing beyond the core.
"""
