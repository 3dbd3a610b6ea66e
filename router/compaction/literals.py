"""The substrings every match of a PostgreSQL regular expression must contain: what lets a
regex search skip the segments whose trigram filter rules them out (docs/architecture.md,
"Reading a compacted owner-day"). Pure: no I/O.

Conservative by construction: a run of literal characters is kept only when it sits at the top
level of the expression (outside any group or bracket expression), no quantifier may drop or
repeat part of it, and the expression has no top-level alternation. Anything not understood
(directors ``***``, embedded options ``(?…)``, escapes of letters and digits, which are
classes, constraints or character entries) ends the run or gives up: the answer may miss a
required substring, never name one that a match can lack. The trigram filter folds ASCII case,
so a literal serves ``~*`` as well as ``~`` (the shards' C locale folds ASCII alone)."""

from __future__ import annotations

# The filter holds trigrams: a shorter substring cannot rule a segment out.
FILTERED_BYTES = 3
# Characters with a meaning of their own at the top level of an ARE.
_SPECIAL = set("^$.[](){}|*+?\\")
_QUANTIFIERS = set("*+?{")


def required_literals(pattern: str) -> list[str]:
    """Substrings that every string matching ``pattern`` (as PostgreSQL's ``~`` or, ASCII case
    folded, ``~*``) contains; empty when none can be told safely."""
    if pattern.startswith(("***", "(?")):
        return []
    runs: list[str] = []
    run: list[str] = []
    depth = 0
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if depth > 0:
            index, depth = _inside_group(pattern, index, depth)
            continue
        if char == "|":
            return []
        if char == "(":
            _end(runs, run)
            depth, index = 1, index + 1
            continue
        if char == "[":
            _end(runs, run)
            index = _after_bracket(pattern, index)
            continue
        if char == "{" and not _is_bound(pattern, index):
            return []  # an ordinary "{": rare enough not to be worth reading right
        if char in _QUANTIFIERS:
            # The atom before a quantifier was taken away from the run already (see below).
            index = _after_quantifier(pattern, index)
            continue
        literal, index = _atom(pattern, index)
        if index < len(pattern) and pattern[index] == "{" and not _is_bound(pattern, index):
            return []
        if index < len(pattern) and pattern[index] in _QUANTIFIERS:
            # x* or x? may drop x, x+ or x{m,n} may repeat it: the run ends before it; with
            # x+ (at least one x) x itself starts the next run.
            _end(runs, run)
            if literal is not None and pattern[index] == "+":
                run.append(literal)
            continue
        if literal is None:
            _end(runs, run)
        else:
            run.append(literal)
    if depth > 0:
        return []
    _end(runs, run)
    return runs


def _end(runs: list[str], run: list[str]) -> None:
    if run:
        runs.append("".join(run))
        run.clear()


def _atom(pattern: str, index: int) -> tuple[str | None, int]:
    """The atom at ``index`` and the index after it: its character when it is a literal
    one, else None (``.``, ``^``, ``$``, an escape of a letter or digit)."""
    char = pattern[index]
    if char == "\\":
        if index + 1 >= len(pattern):
            return None, index + 1
        escaped = pattern[index + 1]
        if escaped.isascii() and not escaped.isalnum():
            return escaped, index + 2
        # A class, a constraint, a back reference or a character entry, whose digits (\x41,
        # \u00e9, \0101) it may take in any number: every letter and digit after it too.
        index += 2
        while index < len(pattern) and pattern[index].isascii() and pattern[index].isalnum():
            index += 1
        return None, index
    if char in _SPECIAL:
        return None, index + 1
    return char, index + 1


def _after_bracket(pattern: str, index: int) -> int:
    """The index after the bracket expression opening at ``index`` (a ``]`` first in it is
    literal; ``[:…:]``, ``[.….]`` and ``[=…=]`` hold brackets of their own)."""
    index += 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        if pattern[index] == "[" and index + 1 < len(pattern) and pattern[index + 1] in ":.=":
            closing = pattern.find(pattern[index + 1] + "]", index + 2)
            index = len(pattern) if closing < 0 else closing + 2
            continue
        index += 1
    return index + 1


def _is_bound(pattern: str, index: int) -> bool:
    """Whether the ``{`` at ``index`` opens a bound: ``{m}``, ``{m,}`` or ``{m,n}``."""
    closing = pattern.find("}", index)
    inside = pattern[index + 1 : closing] if closing > 0 else ""
    low, _, high = inside.partition(",")
    return low.isdigit() and low.isascii() and (high == "" or (high.isdigit() and high.isascii()))


def _after_quantifier(pattern: str, index: int) -> int:
    """The index after the quantifier at ``index`` (``{m,n}`` whole, and a non-greedy ``?``)."""
    if pattern[index] == "{":
        closing = pattern.find("}", index)
        index = len(pattern) if closing < 0 else closing + 1
    else:
        index += 1
    if index < len(pattern) and pattern[index] == "?":
        index += 1
    return index


def _inside_group(pattern: str, index: int, depth: int) -> tuple[int, int]:
    """One step inside a group: past an escape or a bracket expression whole, and the depth
    after a parenthesis."""
    char = pattern[index]
    if char == "\\":
        return index + 2, depth
    if char == "[":
        return _after_bracket(pattern, index), depth
    if char == "(":
        return index + 1, depth + 1
    if char == ")":
        return index + 1, depth - 1
    return index + 1, depth
