"""The ``dsh-tools`` command line: the demo and the views (``pip install 'dsh-tools[cli]'``).

One module per command or view; :mod:`dsh_tools.__main__` imports each when its command runs:

- the demo: :mod:`.demo` (the scripted turn), :mod:`.demo_tools` (its workspace and tools,
  which ``dsh-tools acp`` serves too), and its views :mod:`.plain_demo` (an ASCII timeline),
  :mod:`.live_demo` (``rich``) and :mod:`.defer_demo` (a decision that waits);
- :mod:`.bench` (the measurements, shared with the repository's ``benchmarks/``) and
  :mod:`.bench_view` (``rich``);
- :mod:`.replay` (``rich``) and :mod:`.worker` (the Temporal worker).

Only the ``rich`` views need the extra; the rest needs nothing beyond the core.
"""
