import pytest

from router.csv_cells import csv_cell as _csv_cell


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, ""),
        ('=HYPERLINK("x")', '\'=HYPERLINK("x")'),
        ("+1", "'+1"),
        ("-sum", "'-sum"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("edge-7", "edge-7"),
        ("10.0.0.0/24", "10.0.0.0/24"),
        (-5, -5),
        (42, 42),
    ],
)
def test_text_that_starts_like_a_formula_is_quoted(value: object, cell: object) -> None:
    assert _csv_cell(value) == cell
