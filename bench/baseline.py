"""A baseline named by its commit: a temporary git worktree of that commit (outside the
repository, removed afterwards) whose router a benchmark runs beside this checkout's on the
same cluster. Results record the commit and its subject, never a path of the machine."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
# The last commit before issue 20's work on the write and search paths: the router whose
# figures the issue's "3x the single-record rate" and "spread >= 2x" targets were set against.
BEFORE_ISSUE_20 = "d7a2a22"
# Every side-by-side benchmark of this machine says so in its JSON.
MACHINE_NOTE = (
    "2 cores shared with other engineers' builds, tests and benchmarks; routers, PostgreSQL "
    "and clients on one host: side-by-side ratios of one run are fair, absolute figures are not"
)


@dataclass(frozen=True)
class Baseline:
    """A checked-out commit: ``code`` is the root of its tree (the directory a router of that
    commit runs from)."""

    commit: str
    subject: str
    native: str
    code: Path

    @property
    def label(self) -> str:
        return f"commit {self.commit[:7]}"

    def record(self) -> dict[str, str]:
        """What a result file says about the baseline."""
        return {"commit": self.commit, "subject": self.subject, "native_extension": self.native}


def git(*args: str) -> str:
    answer = subprocess.run(
        ["git", "-C", str(REPOSITORY), *args], check=True, capture_output=True, text=True
    )
    return answer.stdout.strip()


def native_of(commit: str) -> str:
    """Which shardlog_native the baseline's router imports: the one built into the venv (this
    checkout's), whatever the commit's native/ holds."""
    if not git("ls-tree", commit, "native"):
        return "none: the commit has no native/ (its router does not import the extension)"
    changed = subprocess.run(
        ["git", "-C", str(REPOSITORY), "diff", "--quiet", commit, "HEAD", "--", "native"],
        check=False,
    )
    if changed.returncode == 0:
        return "this checkout's build (the commit's native/ is the same)"
    return "this checkout's build, not rebuilt (the commit's native/ differs)"


@contextmanager
def checkout(commit: str) -> Iterator[Baseline]:
    """``commit`` (any name git resolves) checked out in a temporary detached worktree for as
    long as the context lasts."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    subject = git("show", "-s", "--format=%s", full)
    parent = Path(tempfile.mkdtemp(prefix="shardlog-baseline-"))
    tree = parent / full[:12]
    git("worktree", "add", "--detach", "--quiet", str(tree), full)
    try:
        yield Baseline(full, subject, native_of(full), tree)
    finally:
        removed = subprocess.run(
            ["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(tree)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(parent, ignore_errors=True)
        if removed.returncode != 0:
            git("worktree", "prune")  # forgets the worktree whose directory is gone
