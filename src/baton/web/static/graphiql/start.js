// Baton's GraphiQL page: queries and mutations over HTTP, subscriptions over WebSocket
// (graphql-transport-ws), both on this page's own /graphql. Every request needs a token: the
// headers pane starts with an Authorization template; its headers also go in connection_init.
(function () {
  var here = new URL(window.location.href);
  here.search = "";
  here.hash = "";
  var http = here.toString();
  var ws = http.replace(/^http/, "ws");
  var fetcher = GraphiQL.createFetcher({ url: http, subscriptionUrl: ws });
  var root = ReactDOM.createRoot(document.getElementById("graphiql"));
  root.render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultHeaders: JSON.stringify({ Authorization: "Bearer <token>" }, null, 2),
      defaultEditorToolsVisibility: "headers",
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
    })
  );
})();
