// The page: sign-in, one live event stream for every view, and a router over the URL's hash
// (#/board, #/inbox, #/task/ID, #/graph/ID, #/runs, #/webhooks).

import { Api, AuthError, problem } from "./api.js";
import { announce, debounce, h } from "./dom.js";
import { connect, follow } from "./live.js";
import { Meta } from "./meta.js";
import { CARD, EVENT } from "./tasks.js";
import * as boardView from "./views/board.js";
import * as inboxView from "./views/inbox.js";
import * as taskView from "./views/task.js";

const TOKEN = "baton.token"; // the key in this tab's sessionStorage (GraphiQL's page reads it too)
const GRAPHIQL_HEADERS = "baton.graphiql.headers"; // GraphiQL's headers pane, kept for the tab
const view = document.getElementById("view");
const nav = document.getElementById("nav");
const live = document.getElementById("live");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");

const EVENTS = `subscription BoardEvents($after: ID) {
  taskEvents(after: $after) { ${EVENT} task { ${CARD} } }
}`;

// A cursor to start the stream from, taken before the page loads: every event up to it is in
// what the page reads, and every later one comes on the stream (views drop what they already
// show by version). A task's own last event id would not do: another task's event may still
// commit below it (docs/event-log.md).
const HEAD = `query BoardHead { streamCursors { taskEvents } }`;

async function headCursor(api) {
  const data = await api.request(HEAD);
  return data.streamCursors.taskEvents;
}

const STATUS = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…", error: "Live updates failed" };

function setStatus(status) {
  live.hidden = false;
  live.dataset.status = status;
  live.textContent = STATUS[status];
}

let session = null;

function signIn(message = "") {
  const error = h("p", { class: "message error", role: "alert", id: "signin-error" }, message);
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const button = h("button", { class: "primary" }, "Sign in");
  const form = h(
    "form",
    {
      onsubmit: async (e) => {
        e.preventDefault();
        button.disabled = true;
        error.textContent = "";
        try {
          await start(input.value.trim());
        } catch (err) {
          error.textContent =
            err instanceof AuthError
              ? "This token was not accepted: it is mistyped, revoked or expired."
              : problem(err);
          button.disabled = false;
          input.focus();
        }
      },
    },
    h("p", { class: "field" }, h("label", { for: "token" }, "API token"), input),
    h("p", {}, button),
  );
  view.replaceChildren(
    h(
      "section",
      { class: "signin", "aria-labelledby": "signin-title" },
      h("h1", { id: "signin-title" }, "Sign in to the board"),
      h(
        "p",
        {},
        "Paste an API token, for example from ",
        h("code", {}, "baton token create --principal <owner>"),
        ". It stays in this browser tab only and is forgotten when you sign out or close the tab.",
      ),
      form,
      error,
    ),
  );
  document.title = "Sign in · Baton board";
  input.focus();
}

function signOut(message = "") {
  if (session) {
    session.stop();
    session = null;
  }
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(GRAPHIQL_HEADERS); // it holds a token too: signing out forgets both
  nav.hidden = true;
  live.hidden = true;
  signOutButton.hidden = true;
  who.textContent = "";
  signIn(message);
}

async function start(token) {
  let ended = false;
  let started = false; // until then a refused token is the sign-in form's to report
  const refused = () => {
    if (started && !ended) signOut("The server no longer accepts your token: it was revoked or has expired. Sign in again.");
  };
  const api = new Api(token, refused);
  const meta = await new Meta(api).load(); // throws AuthError for a bad token
  sessionStorage.setItem(TOKEN, token);
  started = true;
  const client = connect(token, { onStatus: setStatus, onRefused: refused });
  const listeners = new Set();
  const activity = [];
  const badge = document.getElementById("inbox-count");
  const ctx = {
    api,
    meta,
    client,
    activity,
    announce,
    problem,
    events: {
      on(fn) {
        listeners.add(fn);
        return () => listeners.delete(fn);
      },
    },
    setInboxCount(n) {
      badge.textContent = n ? String(n) : "";
    },
  };
  const countInbox = debounce(async () => {
    try {
      const data = await inboxView.fetchInbox(ctx);
      ctx.setInboxCount(data.held.length + data.signoff.length);
    } catch {
      // the inbox view shows its own errors
    }
  }, 300);
  setStatus("connecting");
  let unmount = null;
  let route = async () => {};
  const followFrom = (after) =>
    follow(client, {
      query: EVENTS,
      after,
      pick: (data) => data.taskEvents,
      onEvent: (event) => {
        activity.push(event);
        if (activity.length > 200) activity.shift();
        for (const fn of [...listeners]) fn(event);
        if (inboxView.touchesInbox(meta, event)) countInbox();
      },
      onError: (errors) => {
        if (errors.some((e) => e?.extensions?.code === "cursor_expired")) {
          // Away so long that finished work after our cursor was removed (BATON_RETENTION):
          // read everything again and follow from now, rather than miss what changed.
          resync();
          return;
        }
        setStatus("error");
        console.error("taskEvents failed", errors);
      },
    });
  let stream = followFrom(await headCursor(api));
  async function resync() {
    stream.stop();
    try {
      stream = followFrom(await headCursor(api));
      countInbox();
      await route();
    } catch (error) {
      setStatus("error");
      console.error("taskEvents could not start again", error);
    }
  }

  route = async () => {
    const [path, query] = (location.hash.slice(1) || "/board").split("?");
    const [name = "board", arg] = path.split("/").filter(Boolean);
    const params = new URLSearchParams(query ?? "");
    unmount?.();
    unmount = null;
    for (const a of nav.querySelectorAll("a")) {
      a.toggleAttribute("aria-current", a.getAttribute("href") === `#/${name}`);
      if (a.hasAttribute("aria-current")) a.setAttribute("aria-current", "page");
    }
    const id = arg ? decodeURIComponent(arg) : null;
    let mod = boardView;
    if (name === "inbox") mod = inboxView;
    else if (name === "task" && id) mod = taskView;
    else if (name === "graph" && id) mod = await import("./views/graph.js");
    else if (name === "runs") mod = await import("./views/runs.js");
    else if (name === "webhooks") mod = await import("./views/webhooks.js");
    if (ended) return;
    document.title = `${name === "task" || name === "graph" ? `${id} · ` : ""}${name[0].toUpperCase()}${name.slice(1)} · Baton board`;
    view.replaceChildren();
    delete view.dataset.ready;
    unmount = mod.mount(ctx, view, params, id);
  };
  window.addEventListener("hashchange", route);

  session = {
    stop() {
      ended = true;
      window.removeEventListener("hashchange", route);
      unmount?.();
      stream.stop();
      client.dispose();
    },
  };
  nav.hidden = false;
  document.getElementById("nav-runs").hidden = !meta.runs;
  signOutButton.hidden = false;
  who.textContent = `${meta.viewer.handle} (${meta.viewer.kind.toLowerCase()})`;
  countInbox();
  await route();
}

signOutButton.addEventListener("click", () => signOut("You are signed out."));

const saved = sessionStorage.getItem(TOKEN);
if (saved) {
  start(saved).catch((err) => signOut(err instanceof AuthError ? "Your saved token was not accepted any more. Sign in again." : problem(err)));
} else {
  signIn();
}
