"""``python -m dsh_tools.acp``: the same as ``dsh-tools acp``."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
