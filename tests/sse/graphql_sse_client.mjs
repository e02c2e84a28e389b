// graphql-sse's own client (distinct connections mode) running one operation against Baton.
// Usage: node graphql_sse_client.mjs URL TOKEN QUERY VARIABLES_JSON
// Prints one JSON line per result ({"next": result}), then {"complete": true} when the server
// completes the operation, or {"error": message} when the client gives up. No retries: a
// test sees what the server answered.
import { createClient } from "graphql-sse";

const [url, token, query, variables] = process.argv.slice(2);
const client = createClient({
  url,
  headers: { Authorization: `Bearer ${token}` },
  retryAttempts: 0,
});
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
try {
  for await (const result of client.iterate({ query, variables: JSON.parse(variables) })) {
    print({ next: result });
  }
  print({ complete: true });
} catch (error) {
  print({ error: String(error?.message ?? error) });
} finally {
  client.dispose();
}
