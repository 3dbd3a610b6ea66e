"""The admin view in a real browser: shards with their health, a policy saved from its form,
the day tables of an owner, and a retention dry run that shows its plan and drops nothing.
The policy is on a scratch owner of the test's own; nothing but a dry run ever runs."""

from __future__ import annotations

from datetime import timedelta

from selenium.webdriver.common.by import By

from bench.console.browser import console_login
from tests.console.page import cells, open_view, submit, until, write_audit
from tests.support import eventually, map_audit_owner, past_day, run_cli

POLICIES = "/v1/admin/retention/policies"


def days_held(api, key: str, exact: bool = True) -> dict[str, int]:
    """Rows per day of the owner: counted, or as the statistics have them (``exact`` False)."""
    params = {"owner": key, "kind": "audit", "exact": "true" if exact else "false"}
    response = api.get("/v1/admin/tables", params=params)
    assert response.status_code == 200, response.text
    found: dict[str, int] = {}
    for table in response.json()["tables"]:
        found[table["day"]] = found.get(table["day"], 0) + table["rows"]
    return found


def policy_ids(api, key: str) -> list[int]:
    return [p["id"] for p in api.get(POLICIES).json() if p["owner"] == key]


def test_retention_dry_run_shows_the_plan_and_drops_nothing(
    browser, router_process, api, api_token
):
    key, group = map_audit_owner(api, "ui-ret")
    # Kept 40 days while the old rows go in (a write older than the retention is refused).
    put = {"kind": "audit", "group": group, "owner": key, "keep_days": 40, "archive": False}
    assert api.put(POLICIES, json=put).status_code == 200
    # Both days fixed before the write: a day written "now" is not the same on both sides of a
    # midnight, and one of 2 days ago is kept by 10 days (and the old one dropped) either way.
    old = past_day(20, hour=0)
    kept = past_day(2)
    write_audit(
        api,
        [
            {"owner": key, "ts": (old + timedelta(seconds=i)).isoformat(), "content": f"old {i}"}
            for i in range(5)
        ]
        + [{"owner": key, "ts": kept.isoformat(), "content": "kept"}],
    )
    held = days_held(api, key)
    assert held == {old.date().isoformat(): 5, kept.date().isoformat(): 1}
    # The dry run's plan shows the statistics' row counts, which the writing backends report
    # within seconds of their commit (PostgreSQL's cumulative statistics), not at once.
    eventually(lambda: days_held(api, key, exact=False).get(old.date().isoformat()) == 5, 30)
    try:
        console_login(browser, router_process.url, api_token)
        open_view(browser, router_process.url, "admin")
        shards = {s["name"] for s in api.get("/v1/admin/shards").json()}
        until(browser, lambda: {r[0] for r in cells(browser, "#admin-shards")} == shards, "shards")

        values = {"kind": "audit", "group": group, "owner": key, "keep_days": "10"}
        submit(browser, "#policy-form", values)
        until(
            browser,
            lambda: (
                [r[:5] for r in cells(browser, "#admin-policies") if r[2] == key]
                == [["audit", group, key, "10", "no"]]
            ),
            "the policy kept 10 days",
        )

        submit(browser, "#tables-form", {"kind": "audit", "owner": key})
        until(
            browser,
            lambda: {r[2] for r in cells(browser, "#admin-tables")} == set(held),
            "both day tables of the owner",
        )

        browser.find_element(By.ID, "retention-dry-run").click()
        plan = until(
            browser,
            lambda: cells(browser, "#retention-plan table"),
            "the plan's table",
        )
        summary = browser.find_element(By.CSS_SELECTOR, "#retention-plan p.summary").text
        assert summary.startswith("dry_run: "), summary
        mine = [row for row in plan if row[1] == key]
        assert {(row[0], row[2], row[4], row[7]) for row in mine} == {
            ("audit", old.date().isoformat(), "10", "no")
        }, plan
        assert sum(int(row[5]) for row in mine) == 5
        assert days_held(api, key) == held, "a dry run drops nothing"
    finally:
        for policy in policy_ids(api, key):
            assert api.delete(f"{POLICIES}/{policy}").status_code in (200, 204)


def test_the_compaction_of_an_owners_days_is_shown(
    browser, router_process, api, api_token, settings
):
    """An owner's closed day compacted by `shardlog compact`: the admin view lists its
    owner-days done, with their rows and sizes, as GET /v1/admin/compaction has them."""
    key, _group = map_audit_owner(api, "ui-compact")
    day = past_day(9, hour=0)  # a day no other test compacts
    write_audit(
        api,
        [
            {"owner": key, "ts": (day + timedelta(minutes=i)).isoformat(), "content": f"c {i}"}
            for i in range(40)
        ],
    )
    done = run_cli(settings, "compact", "--json", "--owner", key, "--clear-now")
    assert done.returncode == 0, done.stderr
    listed = api.get("/v1/admin/compaction", params={"owner": key}).json()["owner_days"]
    assert listed and {o["state"] for o in listed} == {"done"}
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "admin")
    submit(browser, "#tables-form", {"kind": "audit", "owner": key})
    shown = until(
        browser,
        lambda: [r for r in cells(browser, "#admin-compaction") if r[1] == key],
        "the owner's compacted days",
    )
    assert {(r[0], r[2], r[3]) for r in shown} == {("done", o["day"], o["shard"]) for o in listed}
    assert sum(int(r[4].replace(",", "")) for r in shown) == 40
