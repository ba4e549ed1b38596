"""The error an integration subpackage raises when the optional extra it needs is missing."""

from __future__ import annotations

from typing import NoReturn

__all__ = ["raise_missing_extra"]


def raise_missing_extra(
    error: ModuleNotFoundError, extra: str, needs: str, modules: tuple[str, ...]
) -> NoReturn:
    """Raise the error that names what to install, for ``error`` raised while importing
    ``dsh_tools.<extra>``; re-raise ``error`` itself when the missing module is none of
    ``modules``.

    Args:
        error: what the subpackage's imports raised.
        extra: the subpackage, which is also the extra's name (``mcp`` installs ``[mcp]``).
        needs: what the extra installs, as the message names it (``"psycopg 3"``).
        modules: the top-level modules the extra installs (``("psycopg",)``).
    """
    if (error.name or "").partition(".")[0] not in modules:
        raise error
    raise ModuleNotFoundError(
        f"dsh_tools.{extra} needs the [{extra}] extra ({needs}): {error}; "
        f"install it with: python -m pip install 'dsh-tools[{extra}]'",
        name=error.name,
    ) from error
