"""Model instances from one hand-written SELECT, for the lookups every API request makes.

Django builds and compiles a queryset anew each time it runs. For a one-row lookup by key
that costs several times the statement itself: on the job-creation path the queue lookup took
1.2 ms of CPU against 0.2 ms for its SQL, the token lookup 0.7 ms against 0.14 ms. The few
lookups that run on every request write their SQL once, select each model's concrete columns
in `_meta` order, and build the instances as the ORM's select_related does: `Model.from_db`
on the values after the backend's and the fields' converters (SQLite returns datetimes as
text, booleans as integers), then the related instance cached on its foreign key.

Kept against the ORM by measurement: with the token and queue lookups as querysets
(`select_related`, the queue scoped by a membership join), a job creation ran 26.7-28.3 M
instructions in the web process against 21.6-21.9 M with these statements (+24%; two runs
each of `python -m bench.api_profile --instructions --requests 50`), on a path whose
200 requests/s target has no such margin (docs/load.md).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection, models


def table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[models.Model], field: str) -> str:
    """`"table"."column"` of one field (`"id"`, or a foreign key's `"..._id"`)."""
    field_column = model._meta.get_field(field).column
    return f"{table(model)}.{connection.ops.quote_name(field_column)}"


def select_list(model: type[models.Model]) -> str:
    """`"table"."column", ...` for every concrete field of `model`, in `_meta` order."""
    return _select_list(model, connection.vendor)


@cache
def _select_list(model: type[models.Model], vendor: str) -> str:
    return ", ".join(column(model, field.name) for field in model._meta.concrete_fields)


def fetch_related(sql: str, params: list[Any], *chain: tuple[type[models.Model], str | None]):
    """Run `sql`, which selects `select_list(model)` for each model of `chain` in that order,
    and return the first row's instances, or None.

    `chain` pairs each model with the foreign key (on the previous model) that points to it,
    None for the first: `((Queue, None), (Tenant, "tenant"))` gives a queue whose `.tenant` is
    already loaded.
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    instances: list[models.Model] = []
    start = 0
    for model, via in chain:
        attnames, columns = _columns(model)
        values = list(row[start : start + len(attnames)])
        start += len(attnames)
        for index, column in enumerate(columns):
            # Asked of this thread's connection each time: converters are bound to it.
            for convert in connection.ops.get_db_converters(column) + column.get_db_converters(
                connection
            ):
                values[index] = convert(values[index], column, connection)
        instance = model.from_db(connection.alias, attnames, values)
        if via is not None:
            instances[-1]._meta.get_field(via).set_cached_value(instances[-1], instance)
        instances.append(instance)
    return instances


@cache
def _columns(model: type[models.Model]) -> tuple[list[str], list[Any]]:
    fields = model._meta.concrete_fields
    table = model._meta.db_table
    return [field.attname for field in fields], [field.get_col(table) for field in fields]
