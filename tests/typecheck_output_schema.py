"""Type-level checks of the structured-output schema types, run by pyright (never collected by
pytest): every node needs its ``type``, so leaving it out is a type error. Each ignore below
is required: if the error it silences went away, pyright would report the ignore itself as
unnecessary (``reportUnnecessaryTypeIgnoreComment`` is an error in this project).
"""

from __future__ import annotations

from dsh_tools import StructuredOutputSchema, StructuredSchemaNode

typed_node: StructuredSchemaNode = {"type": "string"}
root: StructuredOutputSchema = {"type": "object", "properties": {"a": {"type": "integer"}}}

untyped_node: StructuredSchemaNode = {"description": "no type"}  # pyright: ignore[reportAssignmentType]
untyped_child: StructuredOutputSchema = {"type": "object", "properties": {"a": {"title": "x"}}}  # pyright: ignore[reportAssignmentType]
