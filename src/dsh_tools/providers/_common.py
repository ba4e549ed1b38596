"""What both adapters share: reading SDK objects, plain JSON copies, and result text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, cast

from dsh_tools import (
    AudioBlock,
    ContentBlock,
    FileBlock,
    ImageBlock,
    TextBlock,
    ToolBatch,
    ToolCallRequest,
    ToolExecutionResult,
    ToolSchema,
    converter,
)
from dsh_tools._for_integrations import describe_media

__all__ = [
    "JsonDict",
    "SupportsModelDump",
    "as_list",
    "as_mapping",
    "check_batch",
    "checked_schemas",
    "content_text",
    "items_of",
    "plain_json",
    "require_str",
]

JsonDict: TypeAlias = dict[str, Any]
"""A plain JSON object as a provider SDK takes and gives it (a ``dict`` of JSON data)."""


class SupportsModelDump(Protocol):
    """An SDK response object (a pydantic model): read through its ``model_dump()``."""

    def model_dump(self) -> Mapping[str, object]: ...


def as_mapping(value: object, what: str) -> Mapping[str, object]:
    """``value`` itself when it is a mapping, else its ``model_dump()``; anything else is a
    ``TypeError`` naming ``what`` was expected.
    """
    if isinstance(value, Mapping):
        return value  # pyright: ignore[reportUnknownVariableType]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped  # pyright: ignore[reportUnknownVariableType]
    raise TypeError(
        f"expected {what} as a mapping or an SDK object with model_dump(), "
        f"not {type(value).__name__}"
    )


def as_list(value: object, where: str) -> list[object]:
    """``value`` as a list when it is a list or tuple; a ``TypeError`` naming ``where`` else."""
    if not isinstance(value, list | tuple):
        raise TypeError(f"{where} must be a list, not {type(value).__name__}")
    return list(cast("Sequence[object]", value))


def items_of(value: object, key: str, owner: str, what: str) -> list[object]:
    """The ``key`` list of a model reply: ``value`` itself when it is that list (a list or
    tuple), else the ``key`` field of ``value`` read as a mapping (``what``, named in the
    ``TypeError``: ``"an Anthropic message"``), which must be a list too (named as
    ``owner "key"``: ``message "content"``).
    """
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return as_list(cast("Sequence[object]", value), f"the {key}")
    return as_list(as_mapping(value, what).get(key), f'{owner} "{key}"')


def require_str(container: Mapping[str, object], key: str, where: str) -> str:
    """``container[key]`` when it is a string; a ``ValueError`` when it is missing and a
    ``TypeError`` when it is not a string, each naming ``where``.
    """
    if key not in container or container[key] is None:
        raise ValueError(f'{where} has no "{key}"')
    value = container[key]
    if not isinstance(value, str):
        raise TypeError(f'{where}."{key}" must be a string, not {type(value).__name__}')
    return value


def checked_schemas(schemas: Iterable[ToolSchema]) -> list[ToolSchema]:
    """``schemas`` as a list, each a :class:`~dsh_tools.ToolSchema` with a non-empty ``str``
    name and a ``str`` description (what every provider requires); a ``TypeError`` naming the
    index and the tool otherwise, before anything is sent.
    """
    checked = list(schemas)
    for index, schema in enumerate(checked):
        if not isinstance(schema, ToolSchema):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"schemas[{index}] must be a ToolSchema, not {type(schema).__name__}")
        name: object = schema.name
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"schemas[{index}].name must be a non-empty str, not {name!r}")
        description: object = schema.description
        if not isinstance(description, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f'schemas[{index}] (tool "{name}"): description must be a str, '
                f"not {type(description).__name__}"
            )
    return checked


def plain_json(value: object) -> Any:
    """A deep plain copy of JSON data: every mapping (frozen or not) becomes a ``dict``, every
    list or tuple a ``list``, so an SDK (or ``json.dumps``) takes it as it is.
    """
    if isinstance(value, Mapping):
        mapping = cast("Mapping[object, object]", value)
        return {str(k): plain_json(v) for k, v in mapping.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in cast("Sequence[object]", value)]
    return value


def _block_type(block: ContentBlock) -> str:
    try:
        wire: object = converter.unstructure(block)
    except Exception:  # an unregistered block type: its class name is the best name we have
        return type(block).__name__
    tag = cast("Mapping[str, object]", wire).get("type") if isinstance(wire, Mapping) else None
    return tag if isinstance(tag, str) else type(block).__name__


def _block_text(block: ContentBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ImageBlock | AudioBlock | FileBlock):
        return describe_media(block)
    return f"[{_block_type(block)} block]"


def content_text(content: Sequence[ContentBlock]) -> str:
    """The text a model reads for ``content``: text blocks as they are, a picture, sound or
    file as its description (``[image/png 640x480, 12 kB]``), every other block as
    ``[<type> block]`` (its wire ``type`` tag), joined by newlines.
    """
    return "\n".join(_block_text(block) for block in content)


def check_batch(
    calls: Sequence[ToolCallRequest], batch: ToolBatch
) -> list[tuple[ToolCallRequest, ToolExecutionResult]]:
    """Pair each call with its result; a ``TypeError``/``ValueError`` when they do not match."""
    if not isinstance(batch, ToolBatch):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"batch must be a ToolBatch, not {type(batch).__name__}")
    calls = list(calls)
    for index, call in enumerate(calls):
        if not isinstance(call, ToolCallRequest):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"calls[{index}] must be a ToolCallRequest, not {type(call).__name__}")
    if len(calls) != len(batch.results):
        raise ValueError(
            f"{len(calls)} calls but the batch has {len(batch.results)} results: "
            "pass the calls the batch ran, in the same order"
        )
    return list(zip(calls, batch.results, strict=True))
