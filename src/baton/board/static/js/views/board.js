// The board: the caller's tasks in one column per state of the protocol, filtered, paged per
// column, and moved by live events as they happen.

import { debounce, h, label, when, words } from "../dom.js";
import { CARD, card } from "../tasks.js";

const PAGE = 50;
const FILTERS = ["project", "requester", "assignee", "type"];

function taskFilter(params, state) {
  const filter = { states: [state] };
  if (params.get("project")) filter.project = params.get("project");
  if (params.get("requester")) filter.requester = params.get("requester");
  if (params.get("assignee")) filter.assignee = params.get("assignee");
  if (params.get("type")) filter.deliverableTypes = [params.get("type")];
  return filter;
}

// The same filter, applied to a task that arrives with an event.
function matches(params, task) {
  return (
    (!params.get("project") || task.project === params.get("project")) &&
    (!params.get("requester") || task.requester === params.get("requester")) &&
    (!params.get("assignee") || task.assignee === params.get("assignee")) &&
    (!params.get("type") || task.packet.deliverableType === params.get("type"))
  );
}

// One query for every column (one alias each), or for the counts alone.
function columnsQuery(states, fields) {
  const vars = states.map((_, i) => `$f${i}: TaskFilter!`).join(", ");
  const body = states.map((_, i) => `c${i}: tasks(filter: $f${i}, first: $first) { ${fields} }`).join("\n");
  return `query BoardColumns(${vars}, $first: Int!) {\n${body}\n}`;
}

const PAGE_FIELDS = `totalCount pageInfo { hasNextPage endCursor } edges { node { ${CARD} } }`;

export function activityItem(meta, event) {
  const change = event.kind === "moved"
    ? `${label(event.fromState)} → ${label(event.toState)} (${words(event.move.toLowerCase())})`
    : event.kind === "created" ? `handed off, now ${label(event.toState)}` : "checkpoint saved";
  return h(
    "li",
    { dataset: { eventId: event.id, taskId: event.taskId } },
    h("time", { datetime: event.at }, when(event.at)),
    " ",
    h("strong", {}, event.actor),
    " · ",
    h("a", { href: `#/task/${encodeURIComponent(event.taskId)}` }, event.taskId),
    " · ",
    change,
  );
}

export function mount(ctx, root, params) {
  const states = ctx.meta.handoff.states;
  const columns = new Map();
  const cards = new Map(); // task id -> { task, el }
  let closed = false;

  const typeSelect = h("select", { id: "filter-type", name: "type" }, h("option", { value: "" }, "Any"));
  ctx.meta.enumValues("DeliverableType").then((values) => {
    for (const v of values) typeSelect.append(h("option", { value: v, selected: params.get("type") === v }, words(v)));
  });
  const known = { project: new Set(), requester: new Set(), assignee: new Set() };
  const lists = {};
  const field = (name, text) => {
    lists[name] = h("datalist", { id: `list-${name}` });
    return h(
      "p",
      { class: "field" },
      h("label", { for: `filter-${name}` }, text),
      h("input", { id: `filter-${name}`, name, value: params.get(name) ?? "", list: `list-${name}`, autocomplete: "off" }),
      lists[name],
    );
  };
  const form = h(
    "form",
    {
      class: "filters",
      "aria-label": "Filter tasks",
      onsubmit: (e) => {
        e.preventDefault();
        const next = new URLSearchParams();
        for (const name of FILTERS) {
          const value = form.elements[name].value.trim();
          if (value) next.set(name, value);
        }
        location.hash = `#/board${next.size ? `?${next}` : ""}`;
      },
    },
    field("project", "Project"),
    field("requester", "Requester"),
    field("assignee", "Assignee"),
    h("p", { class: "field" }, h("label", { for: "filter-type" }, "Deliverable type"), typeSelect),
    h("p", { class: "field buttons" }, h("button", { class: "primary" }, "Apply"), h("a", { href: "#/board", class: "button" }, "Clear")),
  );

  const message = h("p", { class: "message", role: "status" });
  const board = h("div", { class: "columns" });
  const activity = h("ol", { class: "activity", id: "activity" });
  for (const event of ctx.activity) activity.prepend(activityItem(ctx.meta, event));
  const kept = ctx.meta.kept();
  root.replaceChildren(
    h("h1", { class: "visually-hidden" }, "Board"),
    form,
    message,
    kept
      ? h(
          "p",
          { class: "meta removal", id: "retention" },
          `Finished tasks (completed, rejected, cancelled) are removed ${kept} after they finish, with their history; open tasks are kept however old.`,
        )
      : null,
    h(
      "div",
      { class: "board" },
      board,
      h(
        "aside",
        { "aria-labelledby": "activity-title" },
        h("h2", { id: "activity-title" }, "Live activity"),
        activity,
        h("p", { class: "empty", id: "activity-empty" }, "Nothing yet. Hand-offs, moves and checkpoints on your tasks appear here as they happen."),
      ),
    ),
  );

  for (const [i, state] of states.entries()) {
    const id = `col-${state.name}`;
    const count = h("span", { class: "count", "aria-label": "tasks" }, "…");
    const list = h("ol", { class: "cards", "aria-labelledby": id });
    const more = h("button", { type: "button", class: "more", hidden: true, onclick: () => loadMore(state.name) }, "Load more");
    const shown = h("p", { class: "shown" });
    const el = h(
      "section",
      { class: `column state-${state.name}`, dataset: { state: state.name }, "aria-labelledby": id },
      h("h2", { id }, h("span", { class: "name" }, label(state.name)), " ", count),
      h("p", { class: "desc" }, state.description),
      list,
      h("p", { class: "none" }, "No tasks."),
      shown,
      more,
    );
    board.append(el);
    columns.set(state.name, { index: i, el, list, count, more, shown, total: 0, cursor: null });
  }

  function remember(task) {
    for (const key of Object.keys(known)) {
      if (!known[key].has(task[key])) {
        known[key].add(task[key]);
        lists[key].append(h("option", { value: task[key] }));
      }
    }
  }

  function updateShown(column) {
    const n = column.list.children.length;
    column.count.textContent = column.total.toLocaleString();
    column.shown.textContent = n < column.total ? `Showing ${n.toLocaleString()} of ${column.total.toLocaleString()}` : "";
    column.more.hidden = !column.cursor || n >= column.total;
  }

  // Puts a task's card where its state says; a stale snapshot (lower version) is ignored.
  function place(task, { top }) {
    const seen = cards.get(task.id);
    if (seen && seen.task.version >= task.version) return false;
    seen?.el.remove();
    const el = card(ctx.meta, task);
    const column = columns.get(task.state);
    if (top) column.list.prepend(el);
    else column.list.append(el);
    cards.set(task.id, { task, el });
    remember(task);
    return el;
  }

  function fill(column, page) {
    column.total = page.totalCount;
    column.cursor = page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null;
    for (const { node } of page.edges) place(node, { top: false });
  }

  async function load() {
    const names = states.map((s) => s.name);
    const variables = { first: PAGE };
    names.forEach((name, i) => {
      variables[`f${i}`] = taskFilter(params, name);
    });
    try {
      const data = await ctx.api.request(columnsQuery(names, PAGE_FIELDS), variables);
      if (closed) return;
      names.forEach((name, i) => {
        const column = columns.get(name);
        fill(column, data[`c${i}`]);
        updateShown(column);
      });
      performance.mark("baton:board-ready");
      root.dataset.ready = "true";
    } catch (error) {
      message.textContent = ctx.problem(error);
    }
  }

  async function loadMore(state) {
    const column = columns.get(state);
    column.more.disabled = true;
    try {
      const data = await ctx.api.request(
        `query BoardColumn($filter: TaskFilter!, $after: String) {
          tasks(filter: $filter, first: ${PAGE}, after: $after) { ${PAGE_FIELDS} }
        }`,
        { filter: taskFilter(params, state), after: column.cursor },
      );
      fill(column, data.tasks);
      updateShown(column);
    } catch (error) {
      message.textContent = ctx.problem(error);
    } finally {
      column.more.disabled = false;
    }
  }

  // Counts come from the server (a task may move between pages nobody has loaded).
  const recount = debounce(async () => {
    const names = states.map((s) => s.name);
    const variables = { first: 0 };
    names.forEach((name, i) => {
      variables[`f${i}`] = taskFilter(params, name);
    });
    try {
      const data = await ctx.api.request(columnsQuery(names, "totalCount"), variables);
      names.forEach((name, i) => {
        const column = columns.get(name);
        column.total = data[`c${i}`].totalCount;
        updateShown(column);
      });
    } catch (error) {
      message.textContent = ctx.problem(error);
    }
  }, 250);

  const stop = ctx.events.on((event) => {
    activity.prepend(activityItem(ctx.meta, event));
    while (activity.children.length > 200) activity.lastChild.remove();
    if (!matches(params, event.task)) return;
    const el = place(event.task, { top: true });
    if (el) {
      el.classList.add("arrived");
      for (const column of columns.values()) updateShown(column);
      recount();
    }
  });

  load();
  return () => {
    closed = true;
    stop();
  };
}
