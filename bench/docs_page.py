"""docs/benchmarks.md's figures, generated from the committed bench/results/*.json: every block
between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` is rewritten from the spec of
that name in bench/docs_spec.py, each table with its JSON file and the time, commit and mode of
the run that measured it. ``--check`` rewrites nothing and exits 1 when the page differs.

    python -m bench.docs_page [--check] [--page docs/benchmarks.md] [--results bench/results]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import founding
from bench.harness import RESULTS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.DOTALL
)
MISSING = "—"
Format = str | Callable[[Any], str] | None


@dataclass(frozen=True)
class Column:
    """A column: its header and where its value sits in a row (dotted keys). ``@key`` is the
    row's key in a mapping of rows; a path starting with ``/`` is read from the result's root,
    ``{key}`` in it replaced by the row's key (a list's rows are keyed 1, 2, ...)."""

    header: str
    path: str
    fmt: Format = None


@dataclass(frozen=True)
class Table:
    """Rows of one results file: the list or mapping at ``rows``, or the objects at the paths
    of ``entries`` (one row each, labelled); ``within`` names a mapping inside each row whose
    items become the rows (keyed "row / item"); optionally one table per value of
    ``group_by``."""

    file: str
    columns: tuple[Column, ...]
    rows: str = ""
    entries: tuple[tuple[str, str], ...] = ()
    within: str = ""
    group_by: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Verdicts:
    """Every target stated in a results file (a mapping with ``target`` and ``met``), with its
    direction, and every ``context`` figure (a comparison shown, not judged)."""

    file: str


@dataclass(frozen=True)
class Reference:
    """The founding reports' tables that sit beside ``file`` (bench/crud/reference.json), with
    our figure next to theirs where one measures the same thing."""

    file: str


Part = Table | Verdicts | Reference


@dataclass
class Results:
    folder: Path
    _loaded: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> dict[str, Any]:
        if name not in self._loaded:
            loaded = json.loads((self.folder / f"{name}.json").read_text())
            if not isinstance(loaded, dict):
                raise ValueError(f"{name}.json: not an object")
            self._loaded[name] = loaded
        return self._loaded[name]


def lookup(value: Any, path: str) -> Any:
    for key in path.split(".") if path else ():
        if isinstance(value, Mapping):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def number(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return founding.text(value)
    if value is None:
        return MISSING
    if isinstance(value, list):
        return " / ".join(number(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(", ", ": "))
    return str(value)


def cell(value: Any, fmt: Format = None) -> str:
    if value is None:
        text = MISSING
    elif callable(fmt):
        text = fmt(value)
    elif fmt and isinstance(value, int | float) and not isinstance(value, bool):
        text = format(value, fmt)
    else:
        text = number(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


# -- stamps: the time, commit and mode of the run that measured a figure -----------------------


def _commit(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, Mapping):
        sha = next((value[k] for k in ("sha", "commit", "hash", "head") if value.get(k)), None)
        if sha is None:
            return None
        return f"{sha} (uncommitted changes)" if value.get("dirty") else str(sha)
    return None


def _mode(holder: Mapping[str, Any]) -> str | None:
    mode = holder.get("mode")
    if isinstance(mode, str) and mode:
        return mode
    if isinstance(mode, Mapping) and mode:
        name = next((mode[k] for k in ("name", "kind", "mode") if isinstance(mode.get(k), str)), "")
        if not name and isinstance(mode.get("quick"), bool):
            name = "quick" if mode["quick"] else "full"
            if name == "full" and mode.get("full") is False:
                name = "arguments other than the defaults"
        rest = [
            f"{k} {number(v)}"
            for k, v in mode.items()
            if k not in ("name", "kind", "mode", "quick", "full")
            and not isinstance(v, Mapping | list)
        ]
        return ", ".join(x for x in (name, *rest) if x) or None
    params = holder.get("params")
    for where in (holder, params if isinstance(params, Mapping) else {}):
        if isinstance(where.get("mode"), str):
            return str(where["mode"])
        if isinstance(where.get("quick"), bool):
            return "quick" if where["quick"] else "full"
    return None


@dataclass(frozen=True)
class Stamp:
    when: str | None
    commit: str | None
    mode: str | None

    def text(self, file: str) -> str:
        return (
            f"`bench/results/{file}.json`: run {self.when or 'time unknown'}, "
            f"commit {self.commit or 'unknown'}, mode {self.mode or 'unknown'}"
        )


def _stamped_levels(result: Mapping[str, Any], path: str) -> Iterator[Mapping[str, Any]]:
    """The result, then every mapping down ``path``, and the part stamps naming a key on it
    (under ``parts``, or an older run's ``<key>_when`` beside the result's own)."""
    yield result
    parts = result.get("parts") if isinstance(result.get("parts"), Mapping) else {}
    value: Any = result
    for key in path.split(".") if path else ():
        if isinstance(parts, Mapping) and isinstance(parts.get(key), Mapping):
            yield parts[key]
        if isinstance(result.get(f"{key}_when"), str):
            yield {"when": result[f"{key}_when"]}
        value = value.get(key) if isinstance(value, Mapping) else None
        if not isinstance(value, Mapping):
            return
        yield value


def stamp(result: Mapping[str, Any], path: str = "") -> Stamp:
    """The nearest stamp along ``path``: a part re-run later carries its own."""
    when = commit = mode = None
    for level in _stamped_levels(result, path):
        when = level.get("when") if isinstance(level.get("when"), str) else when
        commit = _commit(level.get("commit")) or commit
        mode = _mode(level) or mode
    return Stamp(when, commit, mode)


# -- rendering ---------------------------------------------------------------------------------


def _rows(table: Table, result: Mapping[str, Any]) -> list[tuple[str | None, Any]]:
    if table.entries:
        return [(label, lookup(result, path)) for label, path in table.entries]
    found = lookup(result, table.rows)
    if isinstance(found, Mapping):
        rows: list[tuple[str | None, Any]] = [(str(k), v) for k, v in found.items()]
    elif isinstance(found, list):
        rows = [(str(number), v) for number, v in enumerate(found, start=1)]
    else:
        raise ValueError(f"{table.file}.json: no list or mapping at {table.rows!r}")
    if not table.within:
        return rows
    return [
        (f"{key} / {inner}", item)
        for key, row in rows
        for inner, item in (lookup(row, table.within) or {}).items()
    ]


def _value(column: Column, key: str | None, row: Any, result: Mapping[str, Any]) -> Any:
    if column.path == "@key":
        return key
    if column.path.startswith("/"):
        return lookup(result, column.path[1:].replace("{key}", key or ""))
    return lookup(row, column.path)


def render_table(table: Table, results: Results) -> list[str]:
    result = results[table.file]
    rows = _rows(table, result)
    groups: dict[str, list[tuple[str | None, Any]]] = {}
    for key, row in rows:
        group = str(lookup(row, table.group_by)) if table.group_by else ""
        groups.setdefault(group, []).append((key, row))
    lines: list[str] = []
    for group, members in groups.items():
        if table.caption or group:
            title = " ".join(
                x for x in (table.caption, f"({table.group_by} {group})" * bool(group))
            )
            lines += [f"*{title.strip()}*", ""]
        cells = [
            [cell(_value(c, key, row, result), c.fmt) for c in table.columns]
            for key, row in members
        ]
        lines += [*markdown_table([c.header for c in table.columns], cells), ""]
    return lines


def _mappings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every mapping in a result with its dotted path (the machine and reference aside)."""
    if isinstance(value, Mapping):
        yield ".".join(path), value
        for key, item in value.items():
            if key not in ("machine", "reference"):
                yield from _mappings(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _mappings(item, (*path, str(index)))


def _is_verdict(value: Mapping[str, Any]) -> bool:
    return "target" in value and isinstance(value.get("met"), bool)


def _measured(value: Mapping[str, Any]) -> Any:
    return next((value[k] for k in MEASURED_KEYS if k in value), None)


def _limit(verdict: Mapping[str, Any]) -> str:
    at_most = verdict.get("at_most")
    target = cell(verdict["target"])
    if at_most is True:
        return f"≤ {target}"
    if at_most is False:
        return f"≥ {target}"
    return f"{target} (direction not stated)"


def render_verdicts(part: Verdicts, results: Results) -> list[str]:
    result = results[part.file]
    judged = [
        (name, verdict)
        for name, verdict in _mappings(result)
        if _is_verdict(verdict) and "context" not in name.split(".")
    ]
    context = [
        (f"{name}.context.{key}" if name else f"context.{key}", item)
        for name, holder in _mappings(result)
        if isinstance(holder.get("context"), Mapping)
        for key, item in holder["context"].items()
    ]
    lines: list[str] = []
    if judged:
        # What a verdict states beside its value (an A/A spread, a shortfall, the baseline).
        noted = any(_beside(verdict, VERDICT_KEYS) for _, verdict in judged)
        rows = [
            [
                f"`{name}`",
                cell(_measured(verdict)),
                _limit(verdict),
                "met" if verdict["met"] else "**missed**",
                stamp(result, name).commit or "unknown",
                *([cell(_beside(verdict, VERDICT_KEYS) or None)] if noted else []),
            ]
            for name, verdict in judged
        ]
        header = ["target", "measured", "limit", "verdict", "commit", *(["beside"] * noted)]
        lines += [*markdown_table(header, rows), ""]
    if context:
        rows = [
            [f"`{name}`", cell(_measured(item)), cell(_beside(item))]
            if isinstance(item, Mapping)
            else [f"`{name}`", cell(item), MISSING]
            for name, item in context
        ]
        lines += ["Context (shown, not judged):", ""]
        lines += [*markdown_table(["figure", "measured", "beside"], rows), ""]
    return lines or ["No targets stated in this result.", ""]


MEASURED_KEYS = ("value", "measured", "ratio")
VERDICT_KEYS = (*MEASURED_KEYS, "target", "met", "at_most", "when", "commit", "mode")


def _beside(item: Mapping[str, Any], shown: tuple[str, ...] = MEASURED_KEYS) -> str:
    return "; ".join(
        f"{key} {number(value)}"
        for key, value in item.items()
        if key not in shown and value is not None
    )


def render_reference(part: Reference, results: Results) -> list[str]:
    reference = founding.load()
    ours = results[part.file]
    own = stamp(ours)
    lines = [
        f"The founding reports' figures beside ours (`{founding.REFERENCE_NAME}`): context on "
        "other machines with other methods, not targets. Ours: "
        f"{own.text(part.file)}, on 2 cores shared by the router, the shards and the client.",
        "",
    ]
    header = f"ours (commit {own.commit or 'unknown'})"
    for table in founding.tables_beside(part.file, reference):
        head, rows = founding.side_by_side(part.file, table, ours, header)
        lines += [f"*{cell(founding.caption(table))}*", ""]
        lines += [*markdown_table(head, [[cell(c) for c in row] for row in rows]), ""]
    return lines


def render_part(part: Part, results: Results) -> list[str]:
    if isinstance(part, Verdicts):
        return render_verdicts(part, results)
    if isinstance(part, Reference):
        return render_reference(part, results)
    return render_table(part, results)


def _part_path(part: Part) -> str:
    if isinstance(part, Table):
        return part.rows or (part.entries[0][1] if part.entries else "")
    return ""


def render_block(parts: tuple[Part, ...], results: Results) -> str:
    lines: list[str] = []
    shown = None
    for part in parts:
        if not isinstance(part, Reference):
            current = stamp(results[part.file], _part_path(part)).text(part.file)
            if current != shown:
                lines += [f"From {current}.", ""]
                shown = current
        lines += render_part(part, results)
    return "\n".join(lines).rstrip("\n") + "\n"


def render_page(page: str, blocks: Mapping[str, tuple[Part, ...]], results: Results) -> str:
    named = [m.group("name") for m in BLOCK.finditer(page)]
    unknown = sorted(set(named) - set(blocks))
    absent = sorted(set(blocks) - set(named))
    if unknown or absent:
        raise ValueError(f"blocks on the page without a spec: {unknown}; specs not on it: {absent}")

    def replace(match: re.Match[str]) -> str:
        body = render_block(blocks[match.group("name")], results)
        return f"{match.group(1)}\n{body}\n{match.group(4)}"

    return BLOCK.sub(replace, page)


def main(argv: list[str] | None = None) -> int:
    # The spec's classes are this module's as imported, not as run by ``python -m``.
    from bench.docs_page import Results as Loaded
    from bench.docs_page import render_page as render
    from bench.docs_spec import BLOCKS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    page = args.page.read_text()
    try:
        rendered = render(page, BLOCKS, Loaded(args.results))
    except (OSError, ValueError) as exc:
        print(f"bench.docs_page: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if rendered != page:
            print(
                f"bench.docs_page: {args.page} differs from bench/results/*.json; "
                "run `make bench-docs`",
                file=sys.stderr,
            )
            return 1
        print(f"bench.docs_page: {args.page} matches the results")
        return 0
    args.page.write_text(rendered)
    print(f"bench.docs_page: wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
