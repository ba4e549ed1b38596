"""Sphinx configuration: the Markdown pages (MyST), furo theme.

Built with warnings as errors (``sphinx-build -W``). No intersphinx: the build needs no network.
The API reference (api.md) is plain Markdown like every other page, so it reads the same on a
repository browser; tests/test_api_page.py keeps it complete and its signatures current.
"""

from __future__ import annotations

project = "dsh-tools"
author = "the dsh-tools authors"
copyright = "2026, the dsh-tools authors"
release = "0.1.0"

extensions = ["myst_parser"]

source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
# headings get anchors, so a page links to an API entry as `[name](api.md#name)`
myst_heading_anchors = 3

html_theme = "furo"
html_title = "dsh-tools"
