"""The "Defining tools" page's examples run and print exactly what the page shows."""

from __future__ import annotations

import json

import pytest

from support import load_example


async def test_the_spec_form_example_answers_valid_and_invalid_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/defining-tools.md", "A tool defined with a schema spec: the b").main()

    assert capsys.readouterr().out.splitlines() == [
        "ok: searching . for 'def execute' (at most 5)",
        'error: Error: invalid arguments: missing required property "pattern"; '
        '"max_results" must be an integer; "mode" must be one of ["content","files"]',
        'error: Error: invalid arguments: "arguments" must be an object',
    ]


async def test_the_class_form_example_shows_the_derived_schema_and_answers_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/defining-tools.md", "A tool defined with an attrs class: the").main()
    out = capsys.readouterr().out
    schema_text, _, calls = out.rpartition("}\n")

    assert (json.loads(schema_text + "}"), calls.splitlines()) == (
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file to edit."},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old": {"type": "string", "description": "Exact text to find."},
                            "new": {"type": "string"},
                            "count": {"type": "integer"},
                        },
                        "required": ["old", "new"],
                    },
                },
                "mode": {"type": "string", "enum": ["apply", "preview"], "default": "preview"},
            },
            "required": ["path", "edits"],
        },
        [
            "ok: preview: 1 edit(s) to README.md, first 'trio' -> 'Trio'",
            'error: Error: invalid arguments: missing required property "edits[0].old"; '
            '"edits[1].new" must be a string; "mode" must be one of ["apply","preview"]',
        ],
    )


def test_the_class_form_example_presents_a_call_with_the_typed_instance() -> None:
    tool = load_example(
        "docs/defining-tools.md", "A tool defined with an attrs class: the"
    ).edit_tool

    assert tool.present_call({"path": "a.py", "edits": []}).title == "Edit a.py"


async def test_the_function_form_example_shows_its_schema_and_answers_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/defining-tools.md", "Tools from plain functions: the schema c").main()

    assert capsys.readouterr().out.splitlines() == [
        "search - Search the workspace for a regular expression.",
        "count_lines - Count the lines of a file.",
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "mode": {
                        "type": "string",
                        "description": "List matching files, or matching lines.",
                        "enum": ["files", "content"],
                        "default": "content",
                    },
                    "limit": {"type": "integer", "description": "At most this many results."},
                },
                "required": ["pattern"],
            }
        ),
        'ok: {"pattern":"TODO","mode":"content","hits":["src/app.py:3","src/db.py:41"],'
        '"call":"call-1"}',
        "ok: 3",
        'error: Error: invalid arguments: missing required property "pattern"; '
        '"mode" must be one of ["files","content"]',
    ]


async def test_the_other_classes_example_answers_as_the_page_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await load_example("docs/defining-tools.md", "Parameters from a dataclass, a TypedDict").main()

    assert capsys.readouterr().out.splitlines() == [
        "ok: moved a.txt to b.txt (overwrite=False)",
        'ok: {"path":"b.txt","tags":["draft"],"note":null}',
        "ok: renamed b.txt to c.txt",
        'error: Error: invalid arguments: "new_name": String should have at least 1 character',
    ]
