// Baton's GraphiQL page: queries and mutations over HTTP, subscriptions over WebSocket
// (graphql-transport-ws), both on this page's own /graphql.
//
// Every request needs a token, so the page opens ready to use: it takes the token the board's
// sign-in keeps for this tab, or asks for one once (and checks it) before GraphiQL starts. The
// headers pane starts with that token's Authorization header; GraphiQL sends the pane's headers
// with every request and in the WebSocket's connection_init. An edit of the pane is kept for
// the tab (sessionStorage: a reload keeps it, other tabs and the disk never see it) and, once it
// is valid JSON that differs, the schema is fetched again with it: GraphiQL fetches the schema
// only when its fetcher changes, so the page hands it a new one.
(function () {
  "use strict";
  var TOKEN = "baton.token"; // the board's key: one sign-in serves both pages in a tab
  var HEADERS = "baton.graphiql.headers";
  var SETTLE_MS = 400; // typing pauses this long before the schema is fetched again

  var here = new URL(window.location.href);
  here.search = "";
  here.hash = "";
  var http = here.toString();
  var ws = http.replace(/^http/, "ws");
  var root = document.getElementById("graphiql");

  function headersFor(token) {
    return JSON.stringify({ Authorization: "Bearer " + token }, null, 2);
  }

  // The pane's text as a JSON object, normalised; null while it is not one.
  function normal(text) {
    try {
      var value = JSON.parse(text || "{}");
      return value && typeof value === "object" && !Array.isArray(value) ? JSON.stringify(value) : null;
    } catch (e) {
      return null;
    }
  }

  // A new function each call: GraphiQL fetches the schema again when its fetcher changes.
  function fetcher() {
    return GraphiQL.createFetcher({ url: http, subscriptionUrl: ws });
  }

  function App(props) {
    var initial = React.useRef(props.headers).current;
    var state = React.useState(function () {
      return { key: normal(initial), fetcher: fetcher() };
    });
    var current = state[0];
    var setCurrent = state[1];
    var timer = React.useRef(null);
    var onEditHeaders = React.useCallback(function (text) {
      clearTimeout(timer.current);
      timer.current = setTimeout(function () {
        var key = normal(text);
        if (key === null) return;
        sessionStorage.setItem(HEADERS, text);
        setCurrent(function (previous) {
          return previous.key === key ? previous : { key: key, fetcher: fetcher() };
        });
      }, SETTLE_MS);
    }, []);
    return React.createElement(GraphiQL, {
      fetcher: current.fetcher,
      headers: initial,
      onEditHeaders: onEditHeaders,
      defaultEditorToolsVisibility: "headers",
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false, // GraphiQL would keep them in localStorage, on disk
    });
  }

  function start(headers) {
    ReactDOM.createRoot(root).render(React.createElement(App, { headers: headers }));
  }

  // A token is checked before it is kept: a mistyped one is said at once, not as a 401 later.
  function check(token) {
    return fetch(http, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        authorization: "Bearer " + token,
      },
      body: JSON.stringify({ query: "{ viewer { kind handle } }" }),
    }).then(function (response) {
      if (response.status === 401) throw new Error("This token was not accepted: it is mistyped, revoked or expired.");
      if (!response.ok) throw new Error("The server answered " + response.status + "; try again.");
    });
  }

  function element(tag, attrs, children) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      el.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) {
      el.append(child);
    });
    return el;
  }

  function askForToken() {
    var input = element("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: "", spellcheck: "false" });
    var button = element("button", { type: "submit" }, ["Open GraphiQL"]);
    var error = element("p", { id: "token-error", class: "error", role: "alert" });
    var form = element("form", { class: "baton-signin", "aria-labelledby": "signin-title" }, [
      element("h1", { id: "signin-title" }, ["Baton · GraphiQL"]),
      element("p", {}, [
        "Every request needs an API token, for example from ",
        element("code", {}, ["baton token create --principal <owner>"]),
        ". It goes in the Authorization header and stays in this browser tab only (the board ",
        "signed in from this tab shares it).",
      ]),
      element("p", {}, [element("label", { for: "token" }, ["API token"]), input]),
      element("p", {}, [button]),
      error,
    ]);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = input.value.trim();
      button.disabled = true;
      error.textContent = "";
      check(token).then(
        function () {
          sessionStorage.setItem(TOKEN, token);
          start(headersFor(token));
        },
        function (problem) {
          error.textContent = problem instanceof TypeError ? "The server cannot be reached." : problem.message;
          button.disabled = false;
          input.focus();
        },
      );
    });
    root.replaceChildren(form);
    input.focus();
  }

  var saved = sessionStorage.getItem(HEADERS);
  var token = sessionStorage.getItem(TOKEN);
  if (saved !== null) start(saved);
  else if (token) start(headersFor(token));
  else askForToken();
})();
