"""bench/baseline: a baseline commit checked out in a temporary git worktree, named by its
commit and subject, and gone (tree and git's record of it) afterwards."""

from __future__ import annotations

import subprocess

import pytest

from bench import baseline


def worktrees() -> str:
    return subprocess.run(
        ["git", "-C", str(baseline.REPOSITORY), "worktree", "list", "--porcelain"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_a_baseline_is_its_commit_checked_out_and_removed_afterwards() -> None:
    with baseline.checkout("HEAD~1") as old:
        tree = old.code
        assert old.commit == baseline.git("rev-parse", "HEAD~1")
        assert old.subject == baseline.git("log", "-1", "--format=%s", "HEAD~1")
        assert baseline.git("-C", str(tree), "rev-parse", "HEAD") == old.commit
        assert (tree / "router" / "app.py").is_file()
        assert str(tree) in worktrees()
        assert old.record() == {
            "commit": old.commit,
            "subject": old.subject,
            "native_extension": old.native,
        }
        assert old.label == f"commit {old.commit[:7]}"
    assert not tree.exists() and not tree.parent.exists()
    assert str(tree) not in worktrees()


def test_the_native_extension_of_a_commit_is_described() -> None:
    assert baseline.native_of("HEAD") == "this checkout's build (the commit's native/ is the same)"
    assert baseline.native_of(baseline.BEFORE_ISSUE_20).startswith("none: the commit has no")


def test_a_commit_git_does_not_know_is_refused_before_any_checkout() -> None:
    before = worktrees()
    with pytest.raises(subprocess.CalledProcessError), baseline.checkout("0" * 40):
        raise AssertionError("checked out a commit that does not exist")
    assert worktrees() == before
