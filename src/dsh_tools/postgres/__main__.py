"""``python -m dsh_tools.postgres create-schema DSN [--schema NAME]``: create the tables of the
session logs (once per database, by a role allowed to create them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m dsh_tools.postgres",
        description="Manage dsh-tools session logs in PostgreSQL.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser(
        "create-schema",
        help="create the session logs' tables (nothing if they exist)",
        description="Create the tables PostgresSessionLog needs (nothing if they exist).",
    )
    create.add_argument("dsn", metavar="DSN", help="a libpq connection string or URI")
    create.add_argument("--schema", default="dsh", help="the PostgreSQL schema (default: dsh)")
    arguments = parser.parse_args(argv)

    import psycopg

    from ._log import create_schema, describe_conninfo

    try:
        create_schema(arguments.dsn, schema=arguments.schema)
    except (ValueError, psycopg.Error) as exc:
        print(f"create-schema: {exc}", file=sys.stderr)
        return 1
    print(f"schema {arguments.schema!r} ready in {describe_conninfo(arguments.dsn)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
