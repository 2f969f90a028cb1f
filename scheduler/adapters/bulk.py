"""Write many rows in a few statements: the cycle's writes grow with the cluster, not its queries.

- `rows_update` gives each row its own values, joined to the table on the primary key.
  Django's bulk_update builds a CASE WHEN per row and field instead, about a millisecond of
  Python per row: seconds per cycle at 10,000 jobs.
- `rows_insert` inserts model instances whose primary keys the caller does not need back.
- `ids_update` gives many rows the same values: one `UPDATE ... WHERE id IN (...)` per batch,
  where bulk_update would again build a CASE per row (PostgreSQL took seconds for 2,000 rows).

On PostgreSQL, rows_update sends one array per column and joins `unnest(...)` to the table;
rows_insert sends the rows as one JSON document expanded by `jsonb_to_recordset`, quoted by
libpq in one go: Django's bulk_create sends one array per column, and psycopg's client-side
quoting of arrays of JSON text (a regex call per escaped quote) took more time than the insert
itself for a few thousand pods with labels. On SQLite, `UPDATE ... FROM (VALUES ...)` (3.33+) and
bulk_create. Other databases get bulk_update and bulk_create.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import connection, models

BATCH = 1000
# Bound parameters per statement: below SQLite's 32,766 and PostgreSQL's 65,535.
MAX_PARAMS = 30_000
# Rows per statement when a column's values travel as one array or one JSON document
# (PostgreSQL): bounds the statement's size, not the number of round trips in practice.
DOCUMENT_BATCH = 10_000


def ids_update(model: type[models.Model], ids: Iterable[int], **values: Any) -> int:
    """Set `values` on every row whose primary key is in `ids`; returns the number of ids."""
    ids = sorted(ids)
    for start in range(0, len(ids), BATCH):
        model._default_manager.filter(pk__in=ids[start : start + BATCH]).update(**values)
    return len(ids)


def rows_update(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    same: Mapping[str, Any] | None = None,
) -> int:
    """Set `fields` of each row to its own values: `rows` are (pk, value of fields[0], ...).
    `same` sets more fields to one value for every row (sent once, not once per row).

    Values are what the model attributes would hold; they go through each field's
    get_db_prep_save, as in a save(). Returns the number of rows given.
    """
    rows = list(rows)
    if not rows:
        return 0
    same = dict(same or {})
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    constants = [(meta.get_field(name), value) for name, value in same.items()]
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    key = f"{table}.{quote(meta.pk.column)}"
    fixed = [f"{quote(field.column)} = %s" for field, _ in constants]
    fixed_params = [field.get_db_prep_save(value, connection) for field, value in constants]
    if connection.vendor == "postgresql":
        # One array per column: the fewest bytes to quote and parse when the values are
        # short strings, numbers and timestamps (the JSON document of rows_insert costs twice
        # the client time here).
        names = [f"c{i}" for i in range(len(columns))]
        arrays = ", ".join(f"%s::{field.cast_db_type(connection)}[]" for field in columns)
        assignments = ", ".join(
            [f"{quote(f.column)} = v.{name}" for f, name in zip(columns[1:], names[1:])] + fixed
        )
        sql = (
            f"UPDATE {table} SET {assignments} FROM unnest({arrays}) AS v({', '.join(names)}) "  # noqa: S608 - quoted model names; values are bound parameters
            f"WHERE {key} = v.c0"
        )
        with connection.cursor() as cursor:
            for start in range(0, len(rows), DOCUMENT_BATCH):
                batch = rows[start : start + DOCUMENT_BATCH]
                arrays_params = [
                    [field.get_db_prep_save(row[i], connection) for row in batch]
                    for i, field in enumerate(columns)
                ]
                # SET's placeholders come first in the statement, then unnest's.
                cursor.execute(sql, [*fixed_params, *arrays_params])
        return len(rows)
    if connection.vendor != "sqlite" or connection.Database.sqlite_version_info < (3, 33):
        objs = [model(pk=row[0], **dict(zip(fields, row[1:], strict=True)), **same) for row in rows]
        model._default_manager.bulk_update(objs, [*fields, *same], batch_size=BATCH)
        return len(rows)
    # SQLite names the VALUES columns column1, column2, ...
    assignments = ", ".join(
        [f"{quote(field.column)} = v.column{i}" for i, field in enumerate(columns[1:], 2)] + fixed
    )
    placeholder = "(" + ", ".join(["%s"] * len(columns)) + ")"
    per_batch = max(1, min(BATCH, (MAX_PARAMS - len(fixed)) // len(columns)))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_batch):
            batch = rows[start : start + per_batch]
            cursor.execute(
                f"UPDATE {table} SET {assignments} "  # noqa: S608 - quoted model names; values are bound parameters
                f"FROM (VALUES {', '.join([placeholder] * len(batch))}) AS v "
                f"WHERE {key} = v.column1",
                [
                    *fixed_params,
                    *(
                        field.get_db_prep_save(value, connection)
                        for row in batch
                        for field, value in zip(columns, row, strict=True)
                    ),
                ],
            )
    return len(rows)


def rows_insert(model: type[models.Model], objs: Sequence[models.Model]) -> int:
    """INSERT `objs` (unsaved instances), applying field defaults and auto_now as a save()
    would. Unlike bulk_create, the new primary keys are not set on `objs`. No signals."""
    if not objs:
        return 0
    meta = model._meta
    columns = [field for field in meta.concrete_fields if not field.primary_key]
    if connection.vendor != "postgresql" or not all(map(_travels_as_json, columns)):
        model._default_manager.bulk_create(objs, batch_size=BATCH)
        return len(objs)
    quote = connection.ops.quote_name
    names = ", ".join(quote(field.column) for field in columns)
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({names}) "  # noqa: S608 - quoted model names; values are bound parameters
        f"SELECT {', '.join(f'r.{quote(f.column)}' for f in columns)} FROM {_recordset(columns)}"
    )
    rows = [[field.pre_save(obj, True) for field in columns] for obj in objs]
    _execute_documents(sql, columns, rows)
    return len(objs)


def _recordset(columns: Sequence[models.Field]) -> str:
    quote = connection.ops.quote_name
    types = ", ".join(f"{quote(f.column)} {f.cast_db_type(connection)}" for f in columns)
    return f"jsonb_to_recordset(%s::jsonb) AS r({types})"


def _execute_documents(
    sql: str, columns: Sequence[models.Field], rows: list[Sequence[Any]]
) -> None:
    names = [field.column for field in columns]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), DOCUMENT_BATCH):
            document = [
                {
                    name: _json_value(field, value)
                    for name, field, value in zip(names, columns, row, strict=True)
                }
                for row in rows[start : start + DOCUMENT_BATCH]
            ]
            cursor.execute(sql, [json.dumps(document)])


def _travels_as_json(field: models.Field) -> bool:
    return not isinstance(field, models.JSONField) or field.encoder is None


def _json_value(field: models.Field, value: Any) -> Any:
    """`value` as jsonb_to_recordset reads it back into the column's type."""
    if isinstance(field, models.JSONField):
        return value  # nested as JSON, read back as jsonb
    value = field.get_db_prep_save(value, connection)
    if isinstance(value, datetime | date | time):
        return value.isoformat()  # full precision and offset, unlike DjangoJSONEncoder
    if isinstance(value, Decimal | UUID):
        return str(value)
    return value
