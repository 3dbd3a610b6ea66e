"""The console shows what a token may do and no more: without admin scope no Admin link (and
?view=admin falls back to a view it may see); a token of another tenant gets the API's 403
shown on the owner it named."""

from __future__ import annotations

import httpx
from selenium.webdriver.common.by import By

from bench.console.browser import console_login
from bench.load import window
from router.auth.scopes import AUDIT_READ, DATA_SCOPES, SYSTEM_TENANT
from tests.console import page
from tests.support import await_token, bearer, issue_token


def test_a_token_without_admin_scope_sees_no_admin(browser, router_process, settings):
    token = issue_token(settings, SYSTEM_TENANT, DATA_SCOPES, name="console: no admin")
    await_token(router_process.url, token)
    console_login(browser, router_process.url, token)
    assert browser.find_element(By.ID, "identity").text == "system · console: no admin"
    assert not page.hidden(browser, "#nav-audit") and not page.hidden(browser, "#nav-flows")
    assert page.hidden(browser, "#nav-admin")

    browser.get(f"{router_process.url}/ui/?view=admin")
    page.until(
        browser, lambda: page.query(browser).get("view") == ["audit"], "sent to the audit view"
    )
    page.shown(browser, "#audit-view")
    assert page.hidden(browser, "#admin-view")


def test_another_tenants_owner_is_refused_with_the_apis_message(
    browser, router_process, settings, api
):
    owner = page.unique("ui-theirs")
    page.write_audit(api, [{"owner": owner, "ts": page.recent(5), "content": "not yours"}])
    tenant = page.unique("ui-tenant")
    token = issue_token(settings, tenant, [AUDIT_READ], name="console: other tenant")
    await_token(router_process.url, token)
    refused = httpx.get(
        f"{router_process.url}/v1/audit/search",
        params={"owner": owner, **window()},
        headers=bearer(token),
    )
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]

    console_login(browser, router_process.url, token)
    assert page.hidden(browser, "#nav-flows") and page.hidden(browser, "#nav-admin")
    page.open_view(browser, router_process.url, "audit")
    page.submit(browser, "#audit-form", {"owner": owner, "range": "1h"})
    banner = page.shown(browser, "#error")
    assert banner.text == f"{error['message']} ({error['field']})"
    owner_input = browser.find_element(By.CSS_SELECTOR, "#audit-form [name=owner]")
    assert owner_input.get_dom_attribute("aria-invalid") == "true"
    assert page.rows(browser, "#audit-table") == []
