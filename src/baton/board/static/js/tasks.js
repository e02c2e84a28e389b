// Tasks as the views share them: the fields they read, a card, a state badge and making a move.

import { ago, h, label, words } from "./dom.js";
import { ask, needsInput, run } from "./mutate.js";

export const CARD =
  "id project state waitingOn requester assignee version verification updatedAt packet { task deliverableType }";

export const FULL = `id project state waitingOn requester assignee version verification createdAt updatedAt
  allowedMoves
  packet { task deliverableType acceptanceCriteria context files dependsOn }
  result { summary provenance returnedBy returnedAt evidence { kind summary url content } }
  latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }`;

export const EVENT = "id kind taskId move fromState toState actor reason at version";

// The state as words and as a pattern class, so colour is never the only signal.
export function stateBadge(meta, state, waitingOn = null) {
  const info = meta.state(state);
  const text = waitingOn ? `${label(state)}: ${words(waitingOn)}` : label(state);
  return h("span", { class: `badge state state-${state}`, title: info?.description ?? "" }, text);
}

export function taskLink(task) {
  return `#/task/${encodeURIComponent(task.id)}`;
}

export function card(meta, task) {
  return h(
    "li",
    { class: `card state-${task.state}`, dataset: { taskId: task.id, version: task.version } },
    h("a", { class: "title", href: taskLink(task) }, task.packet.task),
    h("div", { class: "meta" }, h("code", {}, task.id), " · ", task.project, " · ", words(task.packet.deliverableType)),
    h("div", { class: "who" }, task.requester, " → ", task.assignee),
    task.waitingOn ? h("div", { class: "flag" }, `Waiting on ${words(task.waitingOn)}`) : null,
    h("time", { datetime: task.updatedAt, title: task.updatedAt }, `Updated ${ago(task.updatedAt)}`),
  );
}

// "SUBMIT_RESULT" -> "Submit result"
export function moveLabel(name) {
  return label(name.toLowerCase());
}

// Makes move `name` on `task` at the version the page shows, asking first for what the move
// needs (and for confirmation when it ends the task). Null when the person cancelled.
export async function makeMove(ctx, task, name, selection = CARD) {
  const move = ctx.meta.move(name);
  const target = ctx.meta.state(move.to);
  let extra = {};
  if (target.terminal || (await needsInput(ctx.meta, move.mutation))) {
    extra = await ask(ctx.meta, move.mutation, `${moveLabel(name)} ${task.id}?`, {
      intro: `${label(task.state)} → ${label(move.to)}: ${target.description}`,
      confirm: moveLabel(name),
      danger: target.terminal && move.to !== "completed",
    });
    if (extra === null) return null;
  }
  const input = { id: task.id, expectedVersion: task.version, ...extra };
  return run(ctx, move.mutation, input, { task: selection });
}
