// The npm A2A client (@a2a-js/sdk) doing one hand-off with Baton: from nothing but an agent's
// card URL and a token, it streams a message to the agent, prints every event of the stream,
// then fetches the task once the stream has closed.
// Usage: node a2a_js_client.mjs CARD_URL TOKEN BINDING MESSAGE_JSON
//   BINDING: JSONRPC or HTTP+JSON (the transport the client prefers among the card's)
//   MESSAGE_JSON: the A2A message, as ProtoJSON
// Prints one JSON line each: {"binding": name} once the client is made from the card, then
// {"event": StreamResponse} per streamed event, {"closed": true} when the server ends the
// stream, {"task": Task} from GetTask; or {"error": message} when a call fails. No retries:
// the test sees what the server answered.
import { SendMessageRequest, StreamResponse, Task } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  createAuthenticatingFetchWithRetry,
} from "@a2a-js/sdk/client";

const [cardUrl, token, binding, message] = process.argv.slice(2);
const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");

// Baton's tokens go in every request, the card's included (an agent's card needs one).
const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    preferredTransports: [binding],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }),
);
try {
  // The card's own URL, whole: the empty path keeps it as it is.
  const client = await factory.createFromUrl(cardUrl, "");
  print({ binding: client.transport.protocolName });
  const request = SendMessageRequest.fromJSON({ message: JSON.parse(message) });
  let taskId = "";
  for await (const event of client.sendMessageStream(request)) {
    const json = StreamResponse.toJSON(event);
    taskId ||= json.task?.id ?? json.statusUpdate?.taskId ?? json.artifactUpdate?.taskId ?? "";
    print({ event: json });
  }
  print({ closed: true });
  print({ task: Task.toJSON(await client.getTask({ id: taskId, historyLength: 10 })) });
} catch (error) {
  print({ error: String(error?.message ?? error) });
}
