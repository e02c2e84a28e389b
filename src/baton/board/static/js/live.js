// Live events over GraphQL over WebSocket (graphql-transport-ws, with the graphql-ws client),
// resumed after a dropped connection from the last event seen, with no gap and no duplicate.

import { createClient } from "../vendor/graphql-ws-6.4.2/client.js";

const FORBIDDEN = 4403; // the server closes with this when the token is refused

function socketUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/graphql`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// One socket for the whole page. `onStatus(status)` hears "connecting", "live" and
// "reconnecting"; `onRefused()` runs when the server refuses the token.
export function connect(token, { onStatus = () => {}, onRefused = () => {} } = {}) {
  let refused = false;
  return createClient({
    url: socketUrl(),
    connectionParams: { authorization: `Bearer ${token}` },
    keepAlive: 10_000, // a ping every 10 s finds a dead connection
    retryAttempts: Infinity,
    // Quick first retries, then at most ~8 s apart, jittered so many pages do not retry at once.
    retryWait: (retries) => sleep(Math.min(8000, 250 * 2 ** retries) * (0.75 + Math.random() / 2)),
    shouldRetry: (event) => event?.code !== FORBIDDEN,
    on: {
      connecting: (retrying) => onStatus(retrying ? "reconnecting" : "connecting"),
      connected: () => onStatus("live"),
      closed: (event) => {
        if (event?.code === FORBIDDEN) {
          if (!refused) onRefused();
          refused = true;
        } else if (event?.code !== 1000) {
          onStatus("reconnecting");
        }
      },
    },
  });
}

function newer(a, b) {
  return b === null || BigInt(a) > BigInt(b);
}

// Follows a subscription whose events carry increasing `id`s and which takes an `after`
// cursor. Every (re)subscription asks for the events after the last one seen, so a
// reconnect replays exactly what was missed; anything seen already is dropped.
//   pick(data) -> the event in one result
export function follow(client, { query, variables = {}, after = null, pick, onEvent, onError }) {
  let last = after;
  const payload = {
    query,
    // A getter: graphql-ws serialises the payload each time it (re)subscribes.
    get variables() {
      return { ...variables, after: last };
    },
  };
  const stop = client.subscribe(payload, {
    next: (result) => {
      if (result.errors?.length) {
        onError?.(result.errors);
        return;
      }
      const event = pick(result.data);
      if (!newer(event.id, last)) return;
      last = event.id;
      onEvent(event);
    },
    error: (error) => onError?.(Array.isArray(error) ? error : [error]),
    complete: () => {},
  });
  return {
    stop,
    get cursor() {
      return last;
    },
  };
}
