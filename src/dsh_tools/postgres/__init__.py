"""Session logs and a shared limiter in PostgreSQL: ``PostgresSessionLog``, ``create_schema``
and ``PostgresLimiter`` (extra ``[postgres]``: psycopg 3; the core never imports this package). ``python -m
dsh_tools.postgres create-schema DSN`` creates the tables.
"""

from dsh_tools._for_integrations import raise_missing_extra

try:
    from ._limiter import LimiterConnectionError as LimiterConnectionError
    from ._limiter import PostgresLimiter as PostgresLimiter
    from ._log import PostgresSessionLog as PostgresSessionLog
    from ._log import check_database as check_database
    from ._log import create_schema as create_schema
except ModuleNotFoundError as exc:
    raise_missing_extra(exc, "postgres", "psycopg 3", ("psycopg",))

__all__ = [
    "LimiterConnectionError",
    "PostgresLimiter",
    "PostgresSessionLog",
    "check_database",
    "create_schema",
]
