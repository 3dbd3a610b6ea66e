"""One page for every benchmark: bench/results/index.html rendered from the JSON results alone
(nothing is re-run). Per benchmark: when, at which commit, in which mode and on what machine
it ran (per part, for a benchmark measured in parts), its targets met or missed (each verdict
recomputed from its value, target and direction: a stored one that disagrees is flagged), the
figures it shows as context rather than targets, its plot, the founding reports' figures beside
it (bench/crud/reference.json: context, not targets), and its figures as tables.
Self-contained (no script, no style sheet or font from elsewhere); plots and artifacts are
linked relative to the page.

    python -m bench.overview [--results bench/results]
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from bench import founding, stamps
from bench.docs_page import stamp
from bench.harness import RESULTS, verdict

_SKIPPED = (*stamps.KEYS, "reference", "context")
_MAX_ROWS = 60
_MAX_ITEMS = 24

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
.met { color: #11702b; font-weight: 600; } .missed { color: #b3261e; font-weight: 600; }
img { max-width: 100%; border: 1px solid #eee; }
details { margin: .2em 0 .6em 1em; } summary { cursor: pointer; font-weight: 600; }
.note { color: #555; } code { background: #f6f6f6; padding: 0 3px; }
"""


@dataclass(frozen=True)
class Verdict:
    """A target of a benchmark, found anywhere in its result as a mapping with ``target``
    and ``met``: its stored verdict, and the one harness.verdict gives for its value, target
    and direction (None when the direction or value is missing)."""

    name: str
    value: Any
    target: Any
    at_most: bool | None
    stored: bool
    recomputed: bool | None

    @property
    def met(self) -> bool:
        return self.stored if self.recomputed is None else self.recomputed

    @property
    def agrees(self) -> bool:
        return self.recomputed is not None and self.recomputed == self.stored


def judge(name: str, stated: Mapping[str, Any]) -> Verdict:
    value, at_most = stated.get("value"), stated.get("at_most")
    recomputed = None
    if isinstance(at_most, bool) and _number(value) and _number(stated["target"]):
        recomputed = verdict(value, stated["target"], at_most=at_most)["met"]
    direction = at_most if isinstance(at_most, bool) else None
    return Verdict(name, value, stated["target"], direction, stated["met"], recomputed)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def verdicts(result: Mapping[str, Any]) -> list[Verdict]:
    found: list[Verdict] = []

    def walk(value: Any, path: list[str]) -> None:
        if isinstance(value, Mapping):
            if "target" in value and isinstance(value.get("met"), bool):
                found.append(judge(".".join(path), value))
                return
            for key, item in value.items():
                if key not in _SKIPPED:
                    walk(item, [*path, str(key)])

    walk(result, [])
    return found


def contexts(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The figures a result shows beside its targets but does not judge (harness.context)."""
    found = result.get("context", {})
    return {str(k): v for k, v in found.items() if isinstance(v, Mapping)}


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if value is None:
        return "&ndash;"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        shown = ", ".join(_cell(v) for v in value[:_MAX_ITEMS])
        more = len(value) - _MAX_ITEMS
        return shown + (f", &hellip; {more:,} more" if more > 0 else "")
    if isinstance(value, dict | list):
        text = json.dumps(value)
        return html.escape(text if len(text) <= 200 else text[:200] + "…")
    return html.escape(str(value))


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list) or (
        isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    shown = rows[:_MAX_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in shown)
    more = len(rows) - len(shown)
    tail = f'<p class="note">&hellip; {more:,} more rows in the JSON file</p>' if more > 0 else ""
    return f"<table><tr>{head}</tr>{body}</table>{tail}"


def _columns(records: list[Mapping[str, Any]]) -> list[str]:
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    return columns


def render_value(value: Any, depth: int = 0) -> str:
    """Tables for the figures of one result: a mapping of plain values as name/value rows,
    a list (or mapping) of flat records as one table, anything deeper as nested sections."""
    if _scalar(value):
        return f"<p>{_cell(value)}</p>"
    if isinstance(value, list):
        if all(isinstance(v, Mapping) and all(_scalar(x) for x in v.values()) for v in value):
            columns = _columns(value)
            rows = [[_cell(v.get(c)) for c in columns] for v in value]
            return _table(columns, rows)
        return "".join(render_value(v, depth + 1) for v in value[:_MAX_ROWS])
    plain = {k: v for k, v in value.items() if _scalar(v)}
    nested = {k: v for k, v in value.items() if not _scalar(v)}
    parts = []
    if plain:
        parts.append(
            _table(["", "value"], [[html.escape(str(k)), _cell(v)] for k, v in plain.items()])
        )
    records = list(nested.values())
    if len(nested) > 1 and all(
        isinstance(v, Mapping) and all(_scalar(x) for x in v.values()) for v in records
    ):
        columns = _columns(records)
        rows = [
            [html.escape(str(k)), *(_cell(v.get(c)) for c in columns)] for k, v in nested.items()
        ]
        parts.append(_table(["", *columns], rows))
    else:
        for key, item in nested.items():
            opened = " open" if depth == 0 else ""
            parts.append(
                f"<details{opened}><summary>{html.escape(str(key))}</summary>"
                f"{render_value(item, depth + 1)}</details>"
            )
    return "".join(parts)


def _verdict_table(found: list[Verdict]) -> str:
    if not found:
        return '<p class="note">No targets stated in this result.</p>'
    rows = [
        [
            html.escape(v.name),
            _cell(v.value),
            {True: "&le; ", False: "&ge; ", None: "? "}[v.at_most] + _cell(v.target),
            ('<span class="met">met</span>' if v.met else '<span class="missed">MISSED</span>')
            + ("" if v.agrees else _disagreement(v)),
        ]
        for v in found
    ]
    return _table(["target", "measured", "limit", ""], rows)


def _disagreement(found: Verdict) -> str:
    if found.recomputed is None:
        return ' <span class="missed">(no direction stated: not recomputed)</span>'
    stored = "met" if found.stored else "missed"
    return f' <span class="missed">(the result says {stored}: it disagrees)</span>'


def _context_table(found: dict[str, Mapping[str, Any]]) -> str:
    if not found:
        return ""
    rows = [
        [html.escape(name), _cell(item.get("value")), html.escape(str(item.get("compared_with")))]
        for name, item in found.items()
    ]
    return "<h3>Context, not targets</h3>" + _table(["figure", "value", "compared with"], rows)


def _machine(machine: Mapping[str, Any]) -> str:
    return ", ".join(f"{html.escape(str(k))} {_cell(v)}" for k, v in machine.items())


def _stamp(result: Mapping[str, Any]) -> str:
    """When, at which commit and in which mode the figures were measured: per part where the
    result holds parts (of one run or several), an unknown commit or mode said so."""
    parts = result.get("parts")
    if isinstance(parts, Mapping) and parts:
        runs = "several runs" if result.get("several_runs") else "one run"
        each = "; ".join(
            f"part <code>{html.escape(str(name))}</code> {html.escape(_run(part))}"
            for name, part in parts.items()
            if isinstance(part, Mapping)
        )
        return f"Figures of {runs}: {each}"
    return f"Run {html.escape(_run(result))}"


def _run(stamp: Mapping[str, Any]) -> str:
    commit, changed = stamp.get("commit", stamps.UNKNOWN), stamp.get("dirty")
    at = (
        f"commit {commit[:10]}" + (" with uncommitted changes" if changed is True else "")
        if isinstance(commit, str) and commit != stamps.UNKNOWN
        else "commit unknown (measured before results carried their commit)"
    )
    when = stamp.get("when", stamps.UNKNOWN)
    when = "time unknown" if when == stamps.UNKNOWN else str(when)
    note = f" ({stamp['note']})" if "note" in stamp else ""
    return f"{when}, {at}, {stamps.mode_text(stamp.get('mode', stamps.UNKNOWN))}{note}"


def _artifacts(results: Path, name: str) -> str:
    folder = results / name
    if not folder.is_dir():
        return ""
    links = [
        f'<li><a href="{html.escape(f"{name}/{p.relative_to(folder)}")}">'
        f"{html.escape(str(p.relative_to(folder)))}</a></li>"
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in (".html", ".txt", ".json", ".png") and p.parent == folder
    ]
    return f"<p>Artifacts:</p><ul>{''.join(links)}</ul>" if links else ""


def founding_section(name: str, result: Mapping[str, Any]) -> str:
    """The founding reports' tables beside this benchmark (bench/crud/reference.json), with
    ours next to theirs where we measure the same thing: context, never targets."""
    tables = founding.tables_beside(name, founding.load())
    if not tables:
        return ""
    own = stamp(result)
    machine = ", ".join(f"{k} {v}" for k, v in result.get("machine", {}).items())
    ours = f"ours (commit {own.commit or 'unknown'}, {machine})"
    parts = [
        "<h3>The founding reports beside ours (context, not targets)</h3>"
        f'<p class="note">Theirs: <code>{founding.REFERENCE_NAME}</code>, each table with its '
        f"source and machine. Ours: run {html.escape(own.when or 'time unknown')}, commit "
        f"{html.escape(own.commit or 'unknown')}, mode {html.escape(own.mode or 'unknown')}.</p>"
    ]
    for table in tables:
        header, rows = founding.side_by_side(name, table, result, ours)
        parts.append(f'<p class="note">{html.escape(founding.caption(table))}</p>')
        parts.append(_table(header, [[html.escape(c) for c in row] for row in rows]))
    return "".join(parts)


def load(results: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(results.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"bench.overview: skipped {path.name}: {exc}", file=sys.stderr)
            continue
        if isinstance(data, dict):
            yield path.stem, data


def render(results: Path) -> str:
    loaded = list(load(results))
    summary_rows = []
    sections = []
    for name, result in loaded:
        found = verdicts(result)
        missed = sum(not v.met or not v.agrees for v in found)
        anchor = html.escape(name)
        state = (
            "&ndash;"
            if not found
            else f'<span class="{"missed" if missed else "met"}">'
            f"{len(found) - missed}/{len(found)} met</span>"
        )
        summary_rows.append(
            [f'<a href="#{anchor}">{anchor}</a>', html.escape(str(result.get("when", ""))), state]
        )
        plot = results / f"{name}.png"
        image = f'<p><img src="{anchor}.png" alt="plot of {anchor}"></p>' if plot.exists() else ""
        reference = founding_section(name, result)
        sections.append(
            f'<h2 id="{anchor}">{anchor}</h2>'
            f'<p class="note">{_stamp(result)}; on '
            f"{_machine(result.get('machine', {}))}; figures in <code>{anchor}.json</code>.</p>"
            f"<h3>Targets</h3>{_verdict_table(found)}{_context_table(contexts(result))}"
            f"{image}{reference}"
            f"<h3>Figures</h3>"
            f"{render_value({k: v for k, v in result.items() if k not in _SKIPPED})}"
            f"{_artifacts(results, name)}"
        )
    summary = _table(["benchmark", "run", "targets"], summary_rows)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>shardlog benchmarks</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<h1>shardlog benchmarks</h1>"
        '<p class="note">Rendered from bench/results/*.json by <code>make bench-report</code>; '
        "each benchmark's section states the machine, time, commit and mode of its own run "
        "(per part where a benchmark was measured in parts). Every verdict is recomputed from "
        "its value, target and direction; figures compared with a path slow by design or with "
        "other code are context, not targets. Speeds are ratios measured side by side in one "
        "run; medians of several runs.</p>"
        f"{summary}{''.join(sections)}</body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"bench.overview: no results directory {args.results}", file=sys.stderr)
        return 1
    page = args.results / "index.html"
    page.write_text(render(args.results))
    print(f"bench.overview: wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
