// The approval inbox: hand-offs held for the signed-in owner's approval, and verified work
// waiting for the owner's sign-off. Which state each waits in comes from the protocol (the
// `from` of the moves that answer it); what the caller may do, from `allowedMoves`.

import { ago, debounce, h, label, words } from "../dom.js";
import { FULL, makeMove, moveLabel, stateBadge, taskLink } from "../tasks.js";

// Each section: the moves that answer it (the first one decides which tasks belong here).
const SECTIONS = [
  { id: "held", title: "Waiting for your approval", moves: ["APPROVE", "DENY"], waitingOn: "owner_approval" },
  { id: "signoff", title: "Waiting for your sign-off", moves: ["SIGN_OFF", "REQUEST_CHANGES"] },
];

function query(meta) {
  const parts = SECTIONS.map((s) => {
    const filter = { states: [meta.move(s.moves[0]).from] };
    if (s.waitingOn) filter.waitingOn = s.waitingOn;
    return { ...s, filter };
  });
  const body = parts
    .map((p, i) => `${p.id}: tasks(filter: $f${i}, first: 100) { totalCount edges { node { ${FULL} } } }`)
    .join("\n");
  const vars = parts.map((_, i) => `$f${i}: TaskFilter!`).join(", ");
  const variables = Object.fromEntries(parts.map((p, i) => [`f${i}`, p.filter]));
  return { document: `query BoardInbox(${vars}) {\n${body}\n}`, variables };
}

// The tasks of each section the caller can act on: { held: [...], signoff: [...] }.
export async function fetchInbox(ctx) {
  const { document, variables } = query(ctx.meta);
  const data = await ctx.api.request(document, variables);
  const out = {};
  for (const s of SECTIONS) {
    out[s.id] = data[s.id].edges.map((e) => e.node).filter((t) => t.allowedMoves.includes(s.moves[0]));
  }
  return out;
}

// Whether an event can change what the inbox shows.
export function touchesInbox(meta, event) {
  const states = SECTIONS.map((s) => meta.move(s.moves[0]).from);
  return states.includes(event.fromState) || states.includes(event.toState);
}

export function mount(ctx, root) {
  let closed = false;
  const message = h("p", { class: "message", role: "status" });
  const sections = new Map();
  root.replaceChildren(h("h1", {}, "Inbox"), message);
  for (const s of SECTIONS) {
    const list = h("ul", { class: "inbox", id: `inbox-${s.id}` });
    const empty = h("p", { class: "empty" });
    root.append(h("section", { "aria-labelledby": `${s.id}-title` }, h("h2", { id: `${s.id}-title` }, s.title), empty, list));
    sections.set(s.id, { ...s, list, empty });
  }

  function item(section, task) {
    const note = h("p", { class: "message", role: "alert" });
    const buttons = section.moves.map((name) =>
      h(
        "button",
        {
          type: "button",
          class: name === section.moves[0] ? "primary" : "danger",
          onclick: async (e) => {
            const li = e.target.closest("li");
            li.querySelectorAll("button").forEach((b) => (b.disabled = true));
            try {
              const outcome = await makeMove(ctx, task, name);
              if (outcome === null) return;
              if (outcome.ok) {
                ctx.announce(`${task.id}: ${words(moveLabel(name).toLowerCase())}; now ${label(outcome.value.task.state)}.`);
                li.remove();
                refresh();
              } else {
                note.textContent = outcome.text;
              }
            } catch (error) {
              note.textContent = ctx.problem(error);
            } finally {
              li.querySelectorAll("button").forEach((b) => (b.disabled = false));
            }
          },
        },
        moveLabel(name),
      ),
    );
    return h(
      "li",
      { class: "inbox-item", dataset: { taskId: task.id } },
      h("h3", {}, h("a", { href: taskLink(task) }, task.packet.task)),
      h(
        "p",
        { class: "meta" },
        stateBadge(ctx.meta, task.state, task.waitingOn),
        " ",
        h("code", {}, task.id),
        ` · ${task.project} · ${task.requester} → ${task.assignee} · ${words(task.packet.deliverableType)} · ${ago(task.updatedAt)}`,
      ),
      task.result ? h("p", {}, h("strong", {}, "Result: "), task.result.summary) : null,
      h("details", {}, h("summary", {}, "Acceptance criteria"), h("ul", {}, task.packet.acceptanceCriteria.map((c) => h("li", {}, c)))),
      h("p", { class: "actions" }, buttons),
      note,
    );
  }

  async function refresh() {
    try {
      const data = await fetchInbox(ctx);
      if (closed) return;
      for (const section of sections.values()) {
        const tasks = data[section.id];
        section.list.replaceChildren(...tasks.map((t) => item(section, t)));
        section.empty.textContent = tasks.length ? "" : "Nothing waits for you here.";
      }
      ctx.setInboxCount(data.held.length + data.signoff.length);
      root.dataset.ready = "true";
    } catch (error) {
      message.textContent = ctx.problem(error);
    }
  }

  const later = debounce(refresh, 200);
  const stop = ctx.events.on((event) => {
    if (touchesInbox(ctx.meta, event)) later();
  });
  refresh();
  return () => {
    closed = true;
    stop();
  };
}
