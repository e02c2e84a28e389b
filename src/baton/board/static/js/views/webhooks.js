// Webhooks: the owner's endpoints, each with its recent deliveries; redeliver, ping, rotate
// the secret (shown once), enable a disabled endpoint. Reads and writes through the public
// API only (webhookEndpoints, redeliverWebhook, pingWebhookEndpoint, rotateWebhookSecret,
// updateWebhookEndpoint); refreshes every few seconds while shown.

import { problem } from "../api.js";
import { ago, h } from "../dom.js";

const LIST = `query BoardWebhooks { webhookEndpoints(first: 100) {
  id url description enabled disabledReason failures nextAttemptAt taskEvents runEvents
  deliveries(first: 10) { id kind status attempts responseStatus durationMs lastError
    nextAttemptAt eventId updatedAt }
} }`;
const RESULT = "__typename ... on Error { message }";
const ACTIONS = {
  redeliver: `mutation($id: ID!) { redeliverWebhook(input: {deliveryId: $id}) { ${RESULT} } }`,
  ping: `mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) { ${RESULT} } }`,
  enable: `mutation($id: ID!) { updateWebhookEndpoint(input: {id: $id, enabled: true}) { ${RESULT} } }`,
  rotate: `mutation($id: ID!) { rotateWebhookSecret(input: {id: $id}) { ${RESULT}
    ... on WebhookSecretSuccess { secret } } }`,
};
const REFRESH_MS = 3000;

export function mount(ctx, root) {
  let closed = false;
  const message = h("p", { class: "message", role: "status" });
  const list = h("div", { id: "webhooks" });
  root.replaceChildren(h("h1", {}, "Webhooks"), message, list);

  async function act(kind, id) {
    try {
      const data = await ctx.api.request(ACTIONS[kind], { id });
      const answer = Object.values(data)[0];
      if (answer.message) message.textContent = answer.message;
      else if (answer.secret) {
        message.textContent = `New signing secret (shown once; the old one signs too for a day): ${answer.secret}`;
      } else message.textContent = `${kind}: done.`;
      await load();
    } catch (err) {
      message.textContent = problem(err);
    }
  }

  function delivery(d) {
    const detail = [
      `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`,
      d.responseStatus && !d.lastError?.startsWith("HTTP") ? `HTTP ${d.responseStatus}` : null,
      d.durationMs !== null ? `${d.durationMs} ms` : null,
      d.nextAttemptAt ? `next ${ago(d.nextAttemptAt)}` : null,
      d.lastError,
    ].filter(Boolean).join(" · ");
    return h(
      "tr",
      { dataset: { status: d.status } },
      h("td", {}, d.kind.toLowerCase(), d.eventId ? ` #${d.eventId}` : ""),
      h("td", {}, h("span", { class: "badge" }, d.status.toLowerCase())),
      h("td", {}, detail),
      h("td", {}, ago(d.updatedAt)),
      h("td", {}, h("button", { type: "button", onclick: () => act("redeliver", d.id) }, "Redeliver")),
    );
  }

  function endpoint(e) {
    const logs = [e.taskEvents ? "task events" : null, e.runEvents ? "run events" : null].filter(Boolean).join(", ");
    const state = e.enabled
      ? e.failures ? `retrying: ${e.failures} failed in a row${e.nextAttemptAt ? `, next ${ago(e.nextAttemptAt)}` : ""}` : "active"
      : `disabled: ${e.disabledReason ?? ""}`;
    return h(
      "section",
      { class: "webhook panel", dataset: { id: e.id, enabled: String(e.enabled) } },
      h("h2", {}, e.url),
      h("p", {}, e.description || "", e.description ? " · " : "", logs, " · ", h("strong", {}, state)),
      h(
        "p",
        {},
        !e.enabled ? h("button", { type: "button", onclick: () => act("enable", e.id) }, "Enable") : null,
        h("button", { type: "button", onclick: () => act("ping", e.id) }, "Ping"),
        h("button", { type: "button", onclick: () => act("rotate", e.id) }, "Rotate secret"),
      ),
      e.deliveries.length
        ? h("table", { class: "deliveries" }, h("tbody", {}, e.deliveries.map(delivery)))
        : h("p", {}, "No deliveries yet."),
    );
  }

  async function load() {
    try {
      const data = await ctx.api.request(LIST);
      if (closed) return;
      const endpoints = data.webhookEndpoints;
      list.replaceChildren(...(endpoints.length ? endpoints.map(endpoint) : [h("p", {}, "No webhook endpoints: create one with createWebhookEndpoint.")]));
    } catch (err) {
      if (!closed) message.textContent = problem(err);
    }
    root.dataset.ready = "true";
  }

  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => {
    closed = true;
    clearInterval(timer);
  };
}
