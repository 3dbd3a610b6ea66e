"""The access line's path: one line, bounded."""

from hypothesis import given
from hypothesis import strategies as st

from router.http.observe import MAX_LOGGED_PATH_CHARS, loggable_path


@given(st.text(max_size=600))
def test_a_logged_path_is_one_bounded_printable_line(path: str) -> None:
    shown = loggable_path(path)
    assert shown.isprintable()
    assert len(shown) <= 10 * MAX_LOGGED_PATH_CHARS + 3  # an escape is at most 10 characters


def test_a_plain_path_is_as_it_is() -> None:
    assert loggable_path("/v1/audit/search") == "/v1/audit/search"
    assert loggable_path("/" + "a" * 300) == "/" + "a" * (MAX_LOGGED_PATH_CHARS - 1) + "..."
