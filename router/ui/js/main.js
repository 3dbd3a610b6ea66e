// The console's entry point: sign in with a token, learn what it may do (GET /v1/whoami),
// show only those views, and render whatever the URL says (Back and shared links work).

import { AdminView } from "./admin.js";
import { ApiError, get, setToken, token } from "./api.js";
import { $, hideError, showError } from "./dom.js";
import { FlowsView } from "./flows.js";
import { SearchView } from "./search.js";
import { current, navigate, view } from "./state.js";

const VIEWS = { audit: "audit:read", flows: "flows:read", admin: "admin" };
let identity = null;
let views = {};

function visible(name) {
  for (const section of ["login", "audit", "flows", "admin"]) $(`#${section}-view`).hidden = section !== name;
  for (const link of Object.keys(VIEWS)) $(`#nav-${link}`).classList.toggle("current", link === name);
  if (name !== "audit" && name !== "flows") $("#row-detail").hidden = true;
}

async function route() {
  if (!identity) {
    visible("login");
    return;
  }
  const allowed = Object.keys(VIEWS).filter((name) => identity.scopes.includes(VIEWS[name]));
  let name = view();
  if (!allowed.includes(name)) {
    if (!allowed.length) {
      showError(new Error(`This token (${identity.scopes.join(", ")}) may neither search nor administer.`));
      visible("none");
      return;
    }
    const params = current();
    params.set("view", allowed[0]);
    navigate(params, { replace: true });
    name = allowed[0];
  }
  for (const [other, instance] of Object.entries(views)) if (other !== name && instance.stopTail) instance.stopTail();
  visible(name);
  await views[name].show(current());
}

async function signIn() {
  try {
    identity = await get("/v1/whoami");
  } catch (error) {
    identity = null;
    // Without a stored token, a 401 only means "sign in"; anything else is worth showing.
    if (!(error instanceof ApiError && error.status === 401 && !token())) showError(error);
    if (error instanceof ApiError && error.status === 401) setToken(null);
  }
  const signedIn = Boolean(identity);
  $("#logout").hidden = !signedIn || !token();
  $("#identity").textContent = signedIn
    ? `${identity.tenant} · ${identity.token_name}${identity.any_tenant ? " (authentication off)" : ""}`
    : "";
  for (const [name, scope] of Object.entries(VIEWS)) $(`#nav-${name}`).hidden = !signedIn || !identity.scopes.includes(scope);
  if (signedIn) for (const instance of Object.values(views)) if (instance.allow) instance.allow(identity);
  await route();
  if (!signedIn) $("#token").focus();
}

function start() {
  views = { audit: new SearchView("audit", route), flows: new FlowsView(route), admin: new AdminView(route) };
  $("#login").addEventListener("submit", async (event) => {
    event.preventDefault();
    hideError();
    setToken($("#token").value.trim());
    $("#token").value = "";
    await signIn();
  });
  $("#logout").addEventListener("click", async () => {
    for (const instance of Object.values(views)) if (instance.stopTail) instance.stopTail();
    setToken(null);
    identity = null;
    await signIn();
  });
  for (const name of Object.keys(VIEWS)) {
    $(`#nav-${name}`).addEventListener("click", (event) => {
      event.preventDefault();
      if (navigate(new URLSearchParams({ view: name }))) route();
    });
  }
  $("#row-close").addEventListener("click", () => views[view()].closeRow());
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !$("#row-detail").hidden && views[view()].closeRow) views[view()].closeRow();
  });
  window.addEventListener("popstate", () => route());
  window.addEventListener("shardlog:unauthorized", () => {
    for (const instance of Object.values(views)) if (instance.stopTail) instance.stopTail();
    setToken(null);
    identity = null;
    for (const name of Object.keys(VIEWS)) $(`#nav-${name}`).hidden = true;
    $("#logout").hidden = true;
    $("#identity").textContent = "";
    visible("login");
    $("#token").focus();
  });
  signIn();
}

start();
