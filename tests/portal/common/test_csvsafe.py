"""CSV cells: text that a spreadsheet would run as a formula is marked as text."""

import csv
import io

import pytest

from portal.common.csvsafe import CsvLines, csv_cell


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("plain", "plain"),
        ("a=1", "a=1"),
        ("'=1", "'=1"),
        ("", ""),
        (-5, -5),
        (3, 3),
        (None, None),
    ],
)
def test_csv_cell(value, expected):
    assert csv_cell(value) == expected


def test_lines_quote_as_csv_and_neutralise_every_text_cell():
    writer = CsvLines()
    text = writer.line(["=a,b", 1, "ok", '-"x"']) + writer.line(["+", -2])
    assert list(csv.reader(io.StringIO(text))) == [["'=a,b", "1", "ok", '\'-"x"'], ["'+", "-2"]]
