"""CSV cells that a spreadsheet shows as text, never runs as a formula.

Excel, LibreOffice Calc and Google Sheets treat a cell starting with `=`, `+`, `-`, `@`, a tab
or a carriage return as a formula (OWASP, "CSV Injection"). Text cells that start so get a
leading apostrophe, the spreadsheets' own "this is text" mark; numbers stay numbers.
"""

import csv
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class _Echo:
    """A file whose write() returns the line, for streaming a CSV response row by row."""

    def write(self, value: str) -> str:
        return value


class CsvLines:
    """`line(row)` returns one CSV line with every text cell neutralised."""

    def __init__(self) -> None:
        self._writer = csv.writer(_Echo())

    def line(self, row: Iterable[Any]) -> str:
        return self._writer.writerow([csv_cell(value) for value in row])
