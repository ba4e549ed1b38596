"""Session logs in PostgreSQL: ``PostgresSessionLog`` and ``create_schema`` (extra
``[postgres]``: psycopg 3; the core never imports this package). ``python -m
dsh_tools.postgres create-schema DSN`` creates the tables.
"""

try:
    from ._log import PostgresSessionLog as PostgresSessionLog
    from ._log import create_schema as create_schema
except ModuleNotFoundError as exc:
    if (exc.name or "").partition(".")[0] not in ("psycopg",):
        raise
    raise ModuleNotFoundError(
        f"dsh_tools.postgres needs the [postgres] extra (psycopg 3): {exc}; "
        "install it with: python -m pip install 'dsh-tools[postgres]'",
        name=exc.name,
    ) from exc

__all__ = ["PostgresSessionLog", "create_schema"]
