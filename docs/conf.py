"""Sphinx configuration: MyST markdown pages, API reference from docstrings, furo theme.

Built with warnings as errors (``sphinx-build -W``). No intersphinx: the build needs no network.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

import dsh_tools

project = "dsh-tools"
author = "the dsh-tools authors"
copyright = "2026, the dsh-tools authors"
release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = "dsh-tools"

# The API reference documents each public name once, where the page groups it.
autodoc_member_order = "groupwise"
autodoc_typehints = "signature"
autodoc_default_options = {"exclude-members": "__init__, __new__"}
autodoc_class_signature = "mixed"
# show public aliases by name in signatures (``-> JsonValue``), not expanded
autodoc_type_aliases = {
    name: f"dsh_tools.{name}"
    for name in dsh_tools.__all__
    if not isinstance(getattr(dsh_tools, name), type)
    and not inspect.isfunction(getattr(dsh_tools, name))
    and not name.isupper()
    and name != "converter"
}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# ``Keys:`` documents the keys of a TypedDict (``SchemaProp``) the way ``Args:`` does parameters
napoleon_custom_sections = [("Keys", "params_style")]

_logger = logging.getLogger(__name__)
_DOCUMENTED = re.compile(
    r"^\.\. (?:auto(?:class|function|exception)|dsh-data):: (?:dsh_tools\.)?(\w+)", re.M
)
_MISSING = object()


def _attribute_doc(name: str) -> list[str] | None:
    """The docstring written under ``name``'s assignment in the private module defining it."""
    target = getattr(dsh_tools, name)
    for modname in sorted(m for m in sys.modules if m.startswith("dsh_tools._")):
        if getattr(sys.modules[modname], name, _MISSING) is not target:
            continue
        docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        if ("", name) in docs:
            return list(docs[("", name)])
    return None


def _alias_text(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return re.sub(r"\b(?:dsh_tools|typing|collections\.abc|builtins)\.", "", text)


class PublicData(SphinxDirective):
    """``.. dsh-data:: NAME`` documents a public constant, type alias or object of ``dsh_tools``.

    autodoc cannot: these names are re-exported, and their docstrings live under their
    assignment in a private module. ``:kind:`` is ``constant`` (shows the value), ``alias``
    (shows what it stands for) or ``object``.
    """

    required_arguments = 1
    option_spec: ClassVar[dict[str, Callable[[str], str]]] = {
        "kind": lambda arg: directives.choice(arg, ("constant", "alias", "object"))
    }

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        kind = self.options.get("kind", "alias")
        value = getattr(dsh_tools, name)
        doc = _attribute_doc(name)
        if doc is None:
            _logger.warning("dsh_tools.%s has no docstring under its assignment", name)
            doc = []
        lines = [f".. py:data:: dsh_tools.{name}"]
        if kind == "constant":
            lines.append(f"   :value: {value!r}")
        lines.append("")
        lines.extend(f"   {line}" if line else "" for line in doc)
        if kind == "alias":
            lines.extend(["", f"   Alias of ``{_alias_text(value)}``."])
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), 0, container)
        return list(container.children)


def _check_api_page_covers_the_public_names(app: Sphinx) -> None:
    """Warn (an error under ``-W``) about a public name the API page does not document."""
    page = Path(app.srcdir, "api.md").read_text(encoding="utf-8")
    documented = set(_DOCUMENTED.findall(page))
    missing = sorted(set(dsh_tools.__all__) - documented)
    unknown = sorted(documented - set(dsh_tools.__all__))
    if missing:
        _logger.warning("api.md does not document these public names: %s", ", ".join(missing))
    if unknown:
        _logger.warning("api.md documents names that are not public: %s", ", ".join(unknown))


def setup(app: Sphinx) -> None:
    app.add_directive("dsh-data", PublicData)
    app.connect("builder-inited", _check_api_page_covers_the_public_names)
