"""How docs/api.md writes an entry's signature: ``signature_text`` renders a public name the way
the page shows it, so the page's test can check every signature is current.

A name's entry is a ``### `name` `` heading (qualified by its subpackage outside the core), a
```` ```python ```` block with ``signature_text(module, name)``, and the docstring's first
paragraph. After changing a signature, paste ``signature_text``'s output into the page (the
failing test prints it).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
from typing import Any

_PREFIXES = re.compile(
    r"\b(?:dsh_tools(?:\.[\w]+)*|typing|collections\.abc|builtins|types)\.(?=\w)"
)
_WIDTH = 96


def _clean(text: str) -> str:
    return _PREFIXES.sub("", text)


def _annotation(annotation: Any) -> str:
    if isinstance(annotation, str):
        return _clean(annotation)
    return _clean(inspect.formatannotation(annotation))


def _default(value: object) -> str:
    if inspect.isroutine(value):  # by name, not by its repr's address
        return f"{getattr(value, '__module__', None) or ''}.{value.__qualname__}".lstrip(".")
    return _clean(repr(value))


def _parameters(signature: inspect.Signature) -> list[str]:
    texts: list[str] = []
    star_done = False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and not star_done:
            texts.append("*")
            star_done = True
        if parameter.kind is parameter.VAR_POSITIONAL:
            star_done = True
        text = parameter.name
        if parameter.kind is parameter.VAR_POSITIONAL:
            text = f"*{text}"
        elif parameter.kind is parameter.VAR_KEYWORD:
            text = f"**{text}"
        if parameter.annotation is not parameter.empty:
            text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not parameter.empty:
            default = _default(parameter.default)
            text += (
                f" = {default}" if parameter.annotation is not parameter.empty else f"={default}"
            )
        texts.append(text)
        if parameter.kind is parameter.POSITIONAL_ONLY and (
            _next_kind(signature, parameter) is not parameter.POSITIONAL_ONLY
        ):
            texts.append("/")
    return texts


def _next_kind(signature: inspect.Signature, parameter: inspect.Parameter) -> object:
    names = list(signature.parameters)
    index = names.index(parameter.name)
    if index + 1 < len(names):
        return signature.parameters[names[index + 1]].kind
    return None


def _call(head: str, parameters: list[str], tail: str) -> str:
    one_line = f"{head}({', '.join(parameters)}){tail}"
    if len(one_line) <= _WIDTH:
        return one_line
    lines = [f"{head}("] + [f"    {text}," for text in parameters] + [f"){tail}"]
    return "\n".join(lines)


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def signature_text(module_name: str, name: str) -> str:
    """The first lines of ``name``'s entry: how to call it, or what it is."""
    obj = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(obj):
        word = "exception" if issubclass(obj, BaseException) else "class"
        if issubclass(obj, enum.Enum):
            members = ", ".join(member.name for member in obj)
            return f"class {name}(Enum): {members}"
        if getattr(obj, "_is_protocol", False):
            return f"class {name}(Protocol)"
        if type(obj).__name__ == "_TypedDictMeta":
            return f"class {name}(TypedDict)"
        signature = _signature(obj)
        if signature is None or list(signature.parameters) == ["args", "kwargs"]:
            return f"{word} {name}"
        return _call(
            f"{word} {name}",
            _parameters(signature.replace(return_annotation=inspect.Parameter.empty)),
            "",
        )
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        signature = _signature(obj)
        assert signature is not None, name
        word = "async def" if inspect.iscoroutinefunction(obj) else "def"
        tail = ""
        if signature.return_annotation is not signature.empty:
            tail = f" -> {_annotation(signature.return_annotation)}"
        return _call(f"{word} {name}", _parameters(signature), tail)
    if isinstance(obj, (str, int, float, tuple, frozenset)) and not isinstance(obj, bool):
        return f"{name} = {obj!r}"
    if name[:1].isupper() and not name.isupper():  # a type alias
        return f"{name} = {_clean(obj if isinstance(obj, str) else repr(obj))}"
    return f"{name}: {type(obj).__name__}"
