"""The error an integration subpackage raises when its extra is missing (``_extras``): the
subpackages' imports are checked from a user's side in ``test_outside_integration_inputs.py``."""

from __future__ import annotations

import pytest

from dsh_tools._extras import raise_missing_extra


def test_a_missing_module_of_the_extra_names_the_extra_to_install() -> None:
    missing = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")

    with pytest.raises(ModuleNotFoundError) as caught:
        raise_missing_extra(missing, "postgres", "psycopg 3", ("psycopg",))

    expected = (
        "dsh_tools.postgres needs the [postgres] extra (psycopg 3): No module named 'psycopg'; "
        "install it with: python -m pip install 'dsh-tools[postgres]'",
        "psycopg",
        missing,
    )
    assert expected == (str(caught.value), caught.value.name, caught.value.__cause__)


def test_a_missing_submodule_of_the_extra_names_the_extra_too() -> None:
    missing = ModuleNotFoundError("No module named 'mcp.client'", name="mcp.client")

    with pytest.raises(ModuleNotFoundError, match=r"needs the \[mcp\] extra") as caught:
        raise_missing_extra(missing, "mcp", "mcp >= 2 and jsonschema", ("mcp", "jsonschema"))

    assert "mcp.client" == caught.value.name


def test_a_missing_module_the_extra_does_not_install_is_raised_as_it_is() -> None:
    missing = ModuleNotFoundError("No module named 'elsewhere'", name="elsewhere")

    with pytest.raises(ModuleNotFoundError) as caught:
        raise_missing_extra(missing, "otel", "opentelemetry-api", ("opentelemetry",))

    assert missing is caught.value
