// Pipeline runs (API.md section 6): status and phase labels as the server gives them (the status
// coloured by kind, the phase only while it says more than the status), progress across the
// ordered checkpoints, questions with their answers, the pull request, why a run failed, and
// the owner's events as buttons; live from `runEvents`. The server's schema decides what is read: fields are picked by
// introspection, so the view shows only what the server has, and nothing when it has no runs.

import { h, safeLink, when, words } from "../dom.js";
import { follow } from "../live.js";
import { unwrap } from "../meta.js";
import { ask, fieldLabel, run as runMutation } from "../mutate.js";

const RUN_FIELDS = [
  "id", "project", "taskId", "title", "status", "phase", "checkpoint", "statusLabel", "phaseLabel",
  "version", "createdAt", "updatedAt", "allowedEvents", "questions", "answers", "pullRequestUrl",
  "failureReason",
];

// Phases that add nothing to the status beside them: a parked run is idle, a completed one done.
const QUIET_PHASES = new Set(["idle", "done"]);

// The leaf fields (scalars, enums and lists of them) of a type.
async function leaves(meta, typeName) {
  const type = await meta.type(typeName);
  return (type?.fields ?? [])
    .filter((f) => ["SCALAR", "ENUM"].includes(unwrap(f.type).kind) && !f.args?.some((a) => unwrap(a.type).required))
    .map((f) => f.name);
}

// The node type of a Relay connection field (`events` of Run).
async function nodeType(meta, typeName, field) {
  const type = await meta.type(typeName);
  const connection = await meta.type(unwrap(type.fields.find((f) => f.name === field).type).name);
  const edge = await meta.type(unwrap(connection.fields.find((f) => f.name === "edges").type).name);
  return unwrap(edge.fields.find((f) => f.name === "node").type).name;
}

// Texts of the first list field whose name mentions questions (on the run, or on its events).
function questionsOf(run, events) {
  const pick = (obj) => {
    const key = Object.keys(obj).find((k) => /question/i.test(k) && Array.isArray(obj[k]) && obj[k].length);
    return key ? obj[key] : null;
  };
  if (pick(run)) return pick(run);
  for (const event of [...events].reverse()) {
    if (pick(event)) return pick(event);
  }
  return [];
}

export function mount(ctx, root) {
  root.replaceChildren(h("h1", {}, "Pipeline runs"));
  if (!ctx.meta.runs) {
    root.append(
      h("p", { class: "message", id: "runs-unavailable" }, "This server has no pipeline runs yet: its API has no Run type. This page lights up once it does."),
    );
    root.dataset.ready = "true";
    return () => {};
  }
  let closed = false;
  let stream = null;
  const message = h("p", { class: "message", role: "status" });
  const list = h("ul", { class: "inbox", id: "runs" });
  root.append(message, list);
  const cards = new Map(); // run id -> { run, el }
  const moves = ctx.meta.pipeline.moves;

  const setup = (async () => {
    const fields = await ctx.meta.fieldsOf("Run", RUN_FIELDS);
    const eventType = await nodeType(ctx.meta, "Run", "events");
    const eventFields = await leaves(ctx.meta, eventType);
    const runType = await ctx.meta.type("Run");
    const checkpointType = unwrap(runType.fields.find((f) => f.name === "checkpoint").type).name;
    const checkpoints = await ctx.meta.enumValues(checkpointType);
    // A run's open questions are on the run where the server has `Run.questions`; otherwise the
    // view finds them in its latest events (a page of 50 runs stays well inside the cost budget).
    const events = fields.includes("questions") ? "" : ` events(first: 20) { edges { cursor node { ${eventFields.join(" ")} } } }`;
    const selection = `${fields.join(" ")}${events}`;
    return { selection, eventFields, checkpoints };
  })();

  // The bar counts checkpoints reached; the steps list the ones to reach (the first value,
  // `none`, is where a run starts, not a step): reached ✓, the one a runner is working towards
  // ◐ (only while the run is in progress: a run in the queue or parked works towards nothing),
  // later ones ○.
  function progress(run, checkpoints) {
    const at = Math.max(checkpoints.indexOf(run.checkpoint), 0);
    const max = checkpoints.length - 1;
    const working = run.status === "in_progress";
    const step = (i) =>
      i <= at ? ["done", "✓", "reached"]
      : i === at + 1 && working ? ["current", "◐", "in progress"]
      : ["todo", "○", "to do"];
    return h(
      "div",
      { class: "run-progress" },
      h("progress", { max, value: at, "aria-label": `Checkpoint ${at} of ${max}: ${words(run.checkpoint)}` }),
      h(
        "ol",
        { class: "steps" },
        checkpoints.slice(1).map((c, n) => {
          const [kind, mark, said] = step(n + 1);
          return h("li", { class: kind, dataset: { checkpoint: c } }, h("span", { "aria-hidden": "true" }, mark), " ", words(c), h("span", { class: "visually-hidden" }, ` (${said})`));
        }),
      ),
    );
  }

  // The questions the run asked with the answers given, once answered.
  function answered(run, questions) {
    const answers = run.answers ?? [];
    return h(
      "section",
      { class: "qa" },
      h("h3", {}, "Questions and answers"),
      h("dl", {}, questions.map((q, i) => [h("dt", {}, q), h("dd", {}, answers[i] ?? h("span", { class: "empty" }, "Not answered."))])),
    );
  }

  async function act(run, name, note) {
    const move = moves.find((m) => m.name === name);
    const inputType = await ctx.meta.type(ctx.meta.inputTypeOf(move.mutation));
    const input = { id: run.id };
    if (inputType.inputFields.some((f) => f.name === "expectedVersion")) input.expectedVersion = run.version;
    const { selection } = await setup;
    const needs = inputType.inputFields.some((f) => !["id", "expectedVersion"].includes(f.name) && unwrap(f.type).required);
    if (needs) {
      const extra = await ask(ctx.meta, move.mutation, `${fieldLabel(move.mutation)}: ${run.title ?? run.id}`);
      if (extra === null) return;
      Object.assign(input, extra);
    }
    const outcome = await runMutation(ctx, move.mutation, input, { run: selection });
    if (outcome.ok) {
      note.textContent = "";
      show(outcome.value.run);
    } else {
      note.textContent = outcome.text;
    }
  }

  function answerForm(run, questions, note) {
    const move = moves.find((m) => m.mutation === "provideUserInput");
    const inputs = questions.map((q, i) => h("textarea", { id: `answer-${run.id}-${i}`, rows: 2, required: true }));
    return h(
      "form",
      {
        class: "answers",
        onsubmit: async (e) => {
          e.preventDefault();
          const input = { id: run.id, answers: inputs.map((t) => t.value.trim()) };
          const inputType = await ctx.meta.type(ctx.meta.inputTypeOf(move.mutation));
          if (inputType.inputFields.some((f) => f.name === "expectedVersion")) input.expectedVersion = run.version;
          const { selection } = await setup;
          const outcome = await runMutation(ctx, move.mutation, input, { run: selection });
          if (outcome.ok) show(outcome.value.run);
          else note.textContent = outcome.text;
        },
      },
      h("h3", {}, "Questions for you"),
      questions.map((q, i) => h("p", { class: "field" }, h("label", { for: `answer-${run.id}-${i}` }, q), inputs[i])),
      h("button", { class: "primary" }, "Send answers"),
    );
  }

  async function show(run) {
    const { checkpoints } = await setup;
    const seen = cards.get(run.id);
    if (seen && seen.run.version > run.version) return;
    const events = run.events?.edges.map((e) => e.node) ?? seen?.events ?? [];
    const note = h("p", { class: "message error", role: "alert" });
    const allowed = (run.allowedEvents ?? []).map((name) => moves.find((m) => m.name === name)).filter(Boolean);
    const owners = allowed.filter((m) => m.actor === "owner" && m.mutation !== "provideUserInput");
    const asking = allowed.some((m) => m.mutation === "provideUserInput");
    const questions = questionsOf(run, events);
    const status = ctx.meta.pipeline.states.find((st) => st.name === run.status);
    const el = h(
      "li",
      { class: "inbox-item run", dataset: { runId: run.id, status: run.status } },
      h("h3", {}, run.title ?? run.id),
      h(
        "p",
        { class: "meta" },
        h("span", { class: `badge run-status status-${run.status}`, title: status?.description ?? "" }, run.statusLabel ?? words(run.status)),
        QUIET_PHASES.has(run.phase) ? null : [" ", h("span", { class: "badge run-phase", title: "Phase" }, run.phaseLabel ?? words(run.phase))],
        ` · ${run.project ?? ""} · updated ${when(run.updatedAt)}`,
        run.taskId ? [" · task ", h("a", { href: `#/task/${encodeURIComponent(run.taskId)}` }, run.taskId)] : null,
      ),
      run.failureReason ? h("p", { class: "message error run-failure" }, h("strong", {}, "Why it failed: "), run.failureReason) : null,
      run.pullRequestUrl ? h("p", { class: "run-pr" }, "Pull request: ", safeLink(run.pullRequestUrl)) : null,
      progress(run, checkpoints),
      asking ? answerForm(run, questions, note) : questions.length ? answered(run, questions) : null,
      owners.length
        ? h("p", { class: "actions" }, owners.map((m) => h("button", { type: "button", dataset: { event: m.name }, onclick: () => act(run, m.name, note).catch((err) => (note.textContent = ctx.problem(err))) }, fieldLabel(m.mutation))))
        : null,
      note,
    );
    if (seen) seen.el.replaceWith(el);
    else list.prepend(el);
    cards.set(run.id, { run, el, events });
  }

  async function load() {
    try {
      const { selection, eventFields } = await setup;
      const head = await ctx.api.request(`query BoardRunsHead { runs(first: 1) { edges { node { events(first: 100) { edges { cursor } } } } } }`);
      const edges = head.runs.edges[0]?.node.events.edges ?? [];
      const after = edges.length ? edges[edges.length - 1].cursor : "0";
      const data = await ctx.api.request(`query BoardRuns { runs(first: 50) { edges { node { ${selection} } } } }`);
      if (closed) return;
      for (const { node } of [...data.runs.edges].reverse()) await show(node);
      if (!data.runs.edges.length) message.textContent = "No runs yet.";
      root.dataset.ready = "true";
      const refetch = async (id) => {
        const one = await ctx.api.request(`query BoardRun($id: ID!) { run(id: $id) { ${selection} } }`, { id });
        if (one.run && !closed) show(one.run);
      };
      stream = follow(ctx.client, {
        query: `subscription BoardRunEvents($after: ID) { runEvents(after: $after) { ${eventFields.join(" ")} run { id version } } }`,
        after,
        pick: (d) => d.runEvents,
        onEvent: (event) => {
          message.textContent = "";
          const known = cards.get(event.run.id);
          if (!known || known.run.version < event.run.version) refetch(event.run.id);
        },
        onError: (errors) => {
          message.textContent = `Live run updates failed: ${errors.map((e) => e.message).join("; ")}`;
        },
      });
    } catch (error) {
      message.textContent = ctx.problem(error);
    }
  }

  load();
  return () => {
    closed = true;
    stream?.stop();
  };
}
