"""``PostgresLimiter``: conflict keys, capacity classes and rates held in PostgreSQL, so that
every process of a deployment (Temporal workers included) shares them.

A key, and each slot of a capacity class, is a session-level advisory lock (its id a hash of
the schema, the kind and the name) held on the limiter's own connection while the call's body
runs: a process that dies (its connection ends) frees what it held, ``SIGKILL`` included. A
class of ``n`` slots is ``n`` locks; a call of weight ``w`` holds ``w`` of them. A rate counts
starts in a table, on the database's clock, so every process sees one window::

    <schema>.limiter_starts(class text, started timestamptz)    one row per recent start

One function call takes the whole claim or nothing (``<schema>.limiter_acquire``): one round
trip per acquire, one per release; a claim that cannot be held yet is tried again after
``poll_interval`` (or when the rate's next token is due, or when this process released
something). Advisory locks are re-entrant on one connection, so the limiter never asks the
database for a lock its own connection holds: the calls of one process queue in the registry's
gate first, and the limiter skips its own slots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import psycopg
import trio
from psycopg import sql

from dsh_tools import LimitClaim, RateLimit
from dsh_tools._for_integrations import check_seconds

from ._log import DEFAULT_SCHEMA, check_conninfo, check_schema, describe_conninfo

__all__ = ["LimiterConnectionError", "PostgresLimiter"]

_CREATE_LOCK: Final = 0x6473684C  # "dshL": two limiters creating their objects at once

_FUNCTION: Final = """
CREATE OR REPLACE FUNCTION {schema}.limiter_acquire(
    keys bigint[], slots bigint[], weight integer,
    rate_class text, rate_calls integer, rate_per double precision)
RETURNS TABLE (taken bigint[], wait double precision)
LANGUAGE plpgsql AS $fn$
DECLARE
    held bigint[] := '{{}}';
    id bigint;
    n integer;
    oldest timestamptz;
    moment timestamptz;
BEGIN
    FOREACH id IN ARRAY keys LOOP
        IF NOT pg_try_advisory_lock(id) THEN
            PERFORM pg_advisory_unlock(h) FROM unnest(held) AS h;
            RETURN QUERY SELECT NULL::bigint[], NULL::double precision;
            RETURN;
        END IF;
        held := held || id;
    END LOOP;
    IF weight > 0 THEN
        n := 0;
        FOREACH id IN ARRAY slots LOOP
            EXIT WHEN n = weight;
            IF pg_try_advisory_lock(id) THEN
                held := held || id;
                n := n + 1;
            END IF;
        END LOOP;
        IF n < weight THEN
            PERFORM pg_advisory_unlock(h) FROM unnest(held) AS h;
            RETURN QUERY SELECT NULL::bigint[], NULL::double precision;
            RETURN;
        END IF;
    END IF;
    IF rate_class IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dsh_tools rate ' || rate_class, 0));
        moment := clock_timestamp();
        DELETE FROM {schema}.limiter_starts
            WHERE class = rate_class AND started + make_interval(secs => rate_per) <= moment;
        SELECT count(*), min(started) INTO n, oldest
            FROM {schema}.limiter_starts WHERE class = rate_class;
        IF n >= rate_calls THEN
            PERFORM pg_advisory_unlock(h) FROM unnest(held) AS h;
            RETURN QUERY SELECT NULL::bigint[],
                greatest(0, extract(epoch FROM oldest + make_interval(secs => rate_per) - moment))
                    ::double precision;
            RETURN;
        END IF;
        INSERT INTO {schema}.limiter_starts (class, started) VALUES (rate_class, moment);
    END IF;
    RETURN QUERY SELECT held, NULL::double precision;
END
$fn$
"""


class LimiterConnectionError(ConnectionError):
    """The shared limiter could not reach its database: the call that waited did not run."""


class PostgresLimiter:
    """A :class:`~dsh_tools.Limiter` in a PostgreSQL database, for
    ``ToolRegistry(limiter=...)``: every process whose registry holds a limiter on the same
    database and schema shares its conflict keys, capacity classes (``capacity_limits``, with
    weights) and rates (``rate_limits``). Give every process the same limits.

    Args:
        conninfo: a libpq connection string or URI. The connection is opened here (a bad
            address fails here), and the limiter's table and function are created in
            ``schema`` if they are missing.
        schema: the PostgreSQL schema (a lower-case SQL identifier; the session logs' default).
        poll_interval: seconds between two tries of a claim another process holds.
        statement_timeout: the most seconds one statement may take; past it the statement
            fails, and so does the call that waited (``None``: no bound).

    A slot held by a process that died is free again as soon as PostgreSQL sees its connection
    end. When the connection is lost (the server restarted, the connection was cut), the
    calls waiting for a claim get an error result naming the limiter and their bodies never
    run; calls already running keep running (what they held went with the connection); the
    next claim opens a new connection.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        poll_interval: float = 0.05,
        statement_timeout: float | None = 5.0,
    ) -> None:
        check_conninfo(conninfo)
        check_schema(schema)
        self._poll = check_seconds("poll_interval", poll_interval)
        self._timeout = (
            None
            if statement_timeout is None
            else check_seconds("statement_timeout", statement_timeout)
        )
        self._conninfo = conninfo
        self._schema = schema
        self._place = describe_conninfo(conninfo)
        self._lock = trio.Lock()
        # the lock ids this connection holds, and the connection's generation (a release
        # after a reconnection has nothing to free)
        self._held: set[int] = set()
        self._generation = 0
        self._released = trio.Event()
        self.round_trips = 0
        """Statements sent to the database so far (acquires, releases and tries)."""
        self._connection: psycopg.Connection[tuple[object, ...]] | None = self._connect(create=True)

    def _connect(self, *, create: bool = False) -> psycopg.Connection[tuple[object, ...]]:
        options = (
            ""
            if self._timeout is None
            else (f"-c statement_timeout={max(1, round(self._timeout * 1000))}")
        )
        connection = psycopg.connect(self._conninfo, autocommit=True, options=options)
        if create:
            name = sql.Identifier(self._schema)
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
                connection.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {}.limiter_starts "
                        "(class text NOT NULL, started timestamptz NOT NULL)"
                    ).format(name)
                )
                connection.execute(
                    sql.SQL(
                        "CREATE INDEX IF NOT EXISTS limiter_starts_class "
                        "ON {}.limiter_starts (class, started)"
                    ).format(name)
                )
                connection.execute(sql.SQL(_FUNCTION).format(schema=name))
        return connection

    def __repr__(self) -> str:
        return f"PostgresLimiter({self._place}, schema={self._schema!r})"

    def close(self) -> None:
        """Close the connection (what it held is freed). Idempotent."""
        connection, self._connection = self._connection, None
        self._held.clear()
        if connection is not None:
            connection.close()

    def __enter__(self) -> PostgresLimiter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- the Limiter protocol -------------------------------------------------------------

    async def acquire(self, claim: LimitClaim) -> Callable[[], Awaitable[None]]:
        """Hold ``claim`` among every process sharing this database; return its release."""
        keys = [self._id("key", key) for key in claim.keys]
        slots: list[int] = []
        if claim.weight and claim.capacity_class is not None and claim.capacity_limit:
            slots = [
                self._id("slot", f"{claim.capacity_class}\0{index}")
                for index in range(claim.capacity_limit)
            ]
        rate = claim.rate
        while True:
            wait = self._poll
            async with self._lock:
                # read under the lock: a lock this connection holds would be granted again
                held = self._held
                free = [slot for slot in slots if slot not in held]
                if not any(key in held for key in keys) and len(free) >= claim.weight:
                    taken, wait_hint = await trio.to_thread.run_sync(
                        self._try, keys, free, claim.weight, claim.rate_class, rate
                    )
                    if taken is not None:
                        # no checkpoint from here on: what was taken is released by its caller
                        generation = self._generation
                        self._held.update(taken)
                        return self._releaser(taken, generation)
                    if wait_hint is not None:
                        wait = min(max(wait_hint, 0.001), self._poll * 20)
            released = self._released
            with trio.move_on_after(wait):
                await released.wait()

    def _releaser(self, taken: Sequence[int], generation: int) -> Callable[[], Awaitable[None]]:
        async def release() -> None:
            async with self._lock:
                if generation != self._generation:
                    return  # the connection they were held on is gone, and they with it
                self._held.difference_update(taken)
                if taken:
                    await trio.to_thread.run_sync(self._unlock, list(taken))
            self._released.set()
            self._released = trio.Event()

        return release

    # --- on a worker thread -----------------------------------------------------------------

    def _try(
        self,
        keys: list[int],
        slots: list[int],
        weight: int,
        rate_class: str | None,
        rate: RateLimit | None,
    ) -> tuple[list[int] | None, float | None]:
        connection = self._open()
        calls = per = None
        if rate_class is not None and rate is not None:
            calls, per = rate.calls, rate.per
        self.round_trips += 1
        try:
            row = connection.execute(
                sql.SQL(
                    "SELECT taken, wait FROM {}.limiter_acquire(%s, %s, %s, %s, %s, %s)"
                ).format(sql.Identifier(self._schema)),
                (keys, slots, weight, rate_class, calls, per),
            ).fetchone()
        except psycopg.OperationalError as exc:
            self._lost(connection)
            raise LimiterConnectionError(
                f"the shared limiter lost its PostgreSQL connection ({self._place}) while the "
                f"call waited for its keys, slots or rate: {str(exc).strip()}"
            ) from exc
        assert row is not None
        taken, wait = row
        return (None if taken is None else list(taken), wait)  # type: ignore[arg-type]

    def _unlock(self, taken: list[int]) -> None:
        connection = self._connection
        if connection is None:
            return
        self.round_trips += 1
        try:
            connection.execute(
                "SELECT pg_advisory_unlock(h) FROM unnest(%s::bigint[]) AS h", (taken,)
            )
        except psycopg.OperationalError:
            self._lost(connection)  # the locks went with the connection

    def _open(self) -> psycopg.Connection[tuple[object, ...]]:
        connection = self._connection
        if connection is None or connection.closed:
            try:
                connection = self._connection = self._connect()
            except psycopg.OperationalError as exc:
                raise LimiterConnectionError(
                    f"the shared limiter cannot reach PostgreSQL ({self._place}): "
                    f"{str(exc).strip()}"
                ) from exc
        return connection

    def _lost(self, connection: psycopg.Connection[tuple[object, ...]]) -> None:
        if self._connection is connection:
            self._connection = None
            self._held.clear()
            self._generation += 1
        connection.close()

    def _id(self, kind: str, name: str) -> int:
        digest = hashlib.blake2b(f"{self._schema}\0{kind}\0{name}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)
