// The task page: everything about one task, its history, and the moves the caller may make
// now as buttons; live while it is open.

import { debounce, h, label, safeLink, when, words } from "../dom.js";
import { EVENT, FULL, makeMove, moveLabel, stateBadge, taskLink } from "../tasks.js";

const QUERY = `query BoardTask($id: ID!, $after: String) {
  task(id: $id) { ${FULL} events(first: 100, after: $after) { pageInfo { hasNextPage endCursor } edges { node { ${EVENT} } } } }
}`;

function list(items, empty = "None.") {
  return items?.length ? h("ul", {}, items.map((i) => h("li", {}, i))) : h("p", { class: "empty" }, empty);
}

function section(title, ...body) {
  const id = `sec-${title.toLowerCase().replace(/\W+/g, "-")}`;
  return h("section", { class: "panel", "aria-labelledby": id }, h("h2", { id }, title), body);
}

// The agent a move by an owner (or admin) stands in for, from the move's role in the protocol:
// an assignee's move acts for the assignee, a requester's or verifier's for the requester. Null
// for an agent's own moves and for the owner's own (the gate's, the sign-off).
function actsFor(meta, task, name) {
  if (meta.viewer.kind === "AGENT") return null;
  const role = meta.move(name)?.actor;
  const agent = role === "assignee" ? task.assignee : role === "requester" || role === "verifier" ? task.requester : null;
  return agent && agent !== meta.viewer.handle ? agent : null;
}

function timelineItem(event) {
  const what =
    event.kind === "moved"
      ? `${moveLabel(event.move)}: ${label(event.fromState)} → ${label(event.toState)}`
      : event.kind === "created"
        ? `Handed off (${label(event.toState)})`
        : "Checkpoint saved";
  return h(
    "li",
    { dataset: { eventId: event.id } },
    h("time", { datetime: event.at }, when(event.at)),
    " ",
    h("strong", {}, event.actor),
    ` · ${what} · version ${event.version}`,
    event.reason ? h("q", {}, event.reason) : null,
  );
}

// What a user loses and when: a finished task goes, with its history, once it has been
// finished for the server's retention period (BATON_RETENTION).
function removal(meta, task, state) {
  if (!state.terminal) return null;
  const at = meta.removedAt(task.updatedAt);
  if (at === null) return null;
  return h(
    "p",
    { class: "meta removal", id: "removal" },
    `Finished work is kept ${meta.kept()}: this task, its history, checkpoints and result are removed on `,
    h("time", { datetime: at }, when(at)),
    ".",
  );
}

export function mount(ctx, root, params, id) {
  let task = null;
  let closed = false;
  const seen = new Set();
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const note = h("div", { class: "message", role: "alert", id: "move-message" });
  const head = h("div", { class: "task-head" });
  const body = h("div", { class: "task-body" });
  root.replaceChildren(head, note, body, section("Timeline", timeline));

  function addEvents(events) {
    for (const event of events) {
      if (seen.has(event.id)) continue;
      seen.add(event.id);
      // In event order, whichever arrived first (the page load or the live stream).
      let next = null;
      for (const li of timeline.children) {
        if (BigInt(li.dataset.eventId) > BigInt(event.id)) {
          next = li;
          break;
        }
      }
      timeline.insertBefore(timelineItem(event), next);
    }
  }

  function showMoveResult(name, outcome) {
    note.replaceChildren();
    if (outcome.ok) {
      const now = outcome.value.task;
      note.className = "message ok";
      note.textContent = `${moveLabel(name)}: done. The task is now ${label(now.state)} (version ${now.version}).`;
      ctx.announce(note.textContent);
      load();
      return;
    }
    note.className = "message error";
    note.append(h("p", {}, outcome.text));
    if (outcome.value.__typename === "VersionConflictError") {
      note.append(h("button", { type: "button", class: "primary", onclick: () => load({ clear: true }) }, "Reload the task"));
    }
  }

  function render() {
    const standIns = new Set();
    const moves = task.allowedMoves.map((name) => {
      const agent = actsFor(ctx.meta, task, name);
      if (agent) standIns.add(agent);
      return h(
        "button",
        {
          type: "button",
          class: "move",
          dataset: agent ? { move: name, actsFor: agent } : { move: name },
          onclick: async (e) => {
            const button = e.currentTarget; // not e.target: that may be the "for …" inside it
            button.disabled = true;
            try {
              const outcome = await makeMove(ctx, task, name);
              if (outcome !== null) showMoveResult(name, outcome);
            } catch (error) {
              note.className = "message error";
              note.textContent = ctx.problem(error);
            } finally {
              button.disabled = false;
            }
          },
        },
        moveLabel(name),
        agent ? h("span", { class: "for" }, ` for ${agent}`) : null,
      );
    });
    const viewer = ctx.meta.viewer;
    const acting = standIns.size
      ? h(
          "p",
          { class: "meta acting", id: "acting-for" },
          `You are signed in as ${viewer.handle} (${viewer.kind.toLowerCase()}). A move marked “for …” is that agent's to make: `,
          `you make it in the agent's place, and the task's history records it as made by ${viewer.handle}.`,
        )
      : null;
    const state = ctx.meta.state(task.state);
    head.replaceChildren(
      h("p", { class: "crumbs" }, h("a", { href: "#/board" }, "Board"), " / ", h("code", {}, task.id)),
      h("h1", {}, task.packet.task),
      h(
        "p",
        { class: "meta" },
        stateBadge(ctx.meta, task.state, task.waitingOn),
        ` ${state.description} · version `,
        h("span", { id: "task-version" }, String(task.version)),
        ` · ${words(task.verification.toLowerCase())} verification`,
      ),
      h(
        "p",
        { class: "meta" },
        `${task.project} · ${task.requester} → ${task.assignee} · created ${when(task.createdAt)} · updated ${when(task.updatedAt)} · `,
        h("a", { href: `#/graph/${encodeURIComponent(task.id)}` }, "Dependency graph"),
      ),
      h(
        "div",
        { class: "moves", role: "group", "aria-label": "Moves you may make" },
        moves.length ? moves : h("p", { class: "empty" }, state.terminal ? "This task has ended." : "No move is yours to make now."),
      ),
      // Nodes only: replaceChildren would write a null out as the text "null".
      ...[acting, removal(ctx.meta, task, state)].filter(Boolean),
    );
    const p = task.packet;
    const cp = task.latestCheckpoint;
    const r = task.result;
    body.replaceChildren(
      section(
        "Packet",
        h("dl", {}, h("dt", {}, "Deliverable"), h("dd", {}, words(p.deliverableType)), h("dt", {}, "Context"), h("dd", {}, p.context || "None.")),
        h("h3", {}, "Acceptance criteria"),
        list(p.acceptanceCriteria),
        h("h3", {}, "Files"),
        list(p.files.map((f) => h("code", {}, f))),
        h("h3", {}, "Depends on"),
        list(p.dependsOn.map((d) => h("a", { href: taskLink({ id: d }) }, d))),
      ),
      section(
        "Latest checkpoint",
        cp
          ? [
              h("p", {}, cp.progress),
              h("h3", {}, "Decisions"),
              list(cp.decisions),
              h("h3", {}, "Files touched"),
              list(cp.filesTouched.map((f) => h("code", {}, f))),
              h("h3", {}, "Next steps"),
              list(cp.nextSteps),
              h("h3", {}, "Open questions"),
              list(cp.openQuestions),
            ]
          : h("p", { class: "empty" }, "No checkpoint saved yet."),
      ),
      section(
        "Result",
        r
          ? [
              h("p", {}, r.summary),
              h("p", { class: "meta" }, `Returned by ${r.returnedBy} on ${when(r.returnedAt)} · ${words(r.provenance)}`),
              h("h3", {}, "Evidence"),
              h(
                "ul",
                { class: "evidence" },
                r.evidence.map((e) =>
                  h(
                    "li",
                    {},
                    h("span", { class: "badge" }, words(e.kind)),
                    " ",
                    e.summary,
                    e.url ? [" ", safeLink(e.url)] : null,
                    e.content ? h("pre", {}, e.content) : null,
                  ),
                ),
              ),
            ]
          : h("p", { class: "empty" }, "No result yet."),
      ),
    );
  }

  async function load({ clear = false } = {}) {
    if (clear) note.replaceChildren();
    try {
      let after = null;
      for (;;) {
        const data = await ctx.api.request(QUERY, { id, after });
        if (closed) return;
        if (!data.task) {
          head.replaceChildren(h("h1", {}, "Task not found"));
          note.className = "message error";
          note.textContent = `There is no task ${id}, or you may not see it.`;
          return;
        }
        task = data.task;
        addEvents(task.events.edges.map((e) => e.node));
        if (!task.events.pageInfo.hasNextPage) break;
        after = task.events.pageInfo.endCursor;
      }
      render();
      root.dataset.ready = "true";
    } catch (error) {
      note.className = "message error";
      note.textContent = ctx.problem(error);
    }
  }

  const refresh = debounce(() => load(), 100);
  const stop = ctx.events.on((event) => {
    if (event.taskId !== id) return;
    addEvents([event]);
    if (!task || event.version > task.version) refresh();
  });
  load();
  return () => {
    closed = true;
    stop();
  };
}
