// Running the typed mutations: the document is built from the schema (the mutation's input type
// and result union, by introspection), a form asks for the move's own fields, and every error
// member of the union is put into words.

import { h, words } from "./dom.js";
import { unwrap } from "./meta.js";

const FILLED = new Set(["id", "expectedVersion"]); // the page fills these itself

export function explain(error) {
  switch (error.__typename) {
    case "VersionConflictError":
      return (
        `Someone changed this first: you were looking at version ${error.expectedVersion}, ` +
        `and it is now at version ${error.actualVersion}. Nothing was changed.`
      );
    case "InvalidStateError": {
      const allowed = error.allowedMoves?.length
        ? ` You may now: ${error.allowedMoves.map(words).join(", ")}.`
        : " You may make no move on it now.";
      return `This move is not allowed while the task is ${words(error.state)}.${allowed} Nothing was changed.`;
    }
    case "NotFoundError":
      return "It does not exist, or you may not see it.";
    case "ForbiddenError":
      return `You may see it, but not make this move: ${error.message}`;
    case "InvalidInputError":
      return `The server refused the input at ${error.field}: ${error.message}`;
    case "DuplicateTaskError":
      return `A different task already has the id ${error.id}.`;
    default:
      return error.message ? `Refused (${words(error.code)}): ${error.message}` : "The server refused the change.";
  }
}

// `expectedVersion` -> "Expected version"
export function fieldLabel(name) {
  const text = name.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase();
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// The selection of a mutation's result union: for success members the fields named in
// `success` (e.g. {task: "id state"}) and `events { id }`; for error members their leaves.
async function resultSelection(meta, mutation, success) {
  const union = await meta.type(meta.resultTypeOf(mutation));
  const parts = [];
  for (const { name } of union.possibleTypes) {
    const type = await meta.type(name);
    const fields = [];
    for (const field of type.fields) {
      const t = unwrap(field.type);
      if (field.name in success) fields.push(`${field.name} { ${success[field.name]} }`);
      else if (field.name === "events") fields.push("events { id }");
      else if (t.kind === "SCALAR" || t.kind === "ENUM") fields.push(field.name);
    }
    parts.push(`... on ${name} { ${fields.join(" ")} }`);
  }
  return `__typename ${parts.join(" ")}`;
}

// Runs `mutation(input: …)`; answers {ok, value} (the union member) and, when refused, `text`.
export async function run(ctx, mutation, input, success) {
  const inputType = ctx.meta.inputTypeOf(mutation);
  const selection = await resultSelection(ctx.meta, mutation, success);
  const document = `mutation BoardMove($input: ${inputType}!) { result: ${mutation}(input: $input) { ${selection} } }`;
  const data = await ctx.api.request(document, { input });
  const value = data.result;
  const ok = value.__typename.endsWith("Success");
  return ok ? { ok, value } : { ok, value, text: explain(value) };
}

// --- forms built from input types ----------------------------------------------------------

let formIds = 0;

async function control(meta, field, prefix) {
  const t = unwrap(field.type);
  // A field with a default may be left out: the server fills it in.
  t.required = t.required && (field.defaultValue === null || field.defaultValue === undefined);
  const id = `f${++formIds}`;
  const name = prefix + field.name;
  const title = fieldLabel(field.name) + (t.required ? "" : " (optional)");
  if (t.kind === "INPUT_OBJECT" && !t.list) {
    const inner = await controls(meta, t.name, `${name}.`);
    const box = h("fieldset", {}, h("legend", {}, title), inner.map((c) => c.element));
    return { element: box, name: field.name, read: () => collect(inner) };
  }
  if (t.kind === "INPUT_OBJECT") {
    const items = [];
    const list = h("div", { class: "items" });
    const add = async () => {
      const inner = await controls(meta, t.name, `${name}[${items.length}].`);
      items.push(inner);
      list.append(h("fieldset", {}, h("legend", {}, `${fieldLabel(field.name)} ${items.length}`), inner.map((c) => c.element)));
    };
    await add();
    const more = h("button", { type: "button", onclick: add }, `Add to ${fieldLabel(field.name).toLowerCase()}`);
    return { element: h("div", { class: "group" }, h("p", {}, title), list, more), name: field.name, read: () => items.map(collect) };
  }
  let input;
  if (t.kind === "ENUM") {
    const values = await meta.enumValues(t.name);
    input = h("select", { id, name, required: t.required }, t.required ? null : h("option", { value: "" }, "—"), values.map((v) => h("option", { value: v, selected: v === field.defaultValue }, words(v))));
  } else if (t.list) {
    input = h("textarea", { id, name, rows: 3, required: t.required, placeholder: "one per line" });
  } else if (t.name === "Int") {
    input = h("input", { id, name, type: "number", required: t.required });
  } else {
    input = h("textarea", { id, name, rows: 2, required: t.required });
  }
  const read = () => {
    const raw = input.value.trim();
    if (t.list) return raw ? raw.split("\n").map((line) => line.trim()).filter(Boolean) : [];
    if (raw === "") return undefined;
    return t.name === "Int" ? Number(raw) : raw;
  };
  const hint = field.description ? h("small", {}, field.description) : null;
  return { element: h("p", { class: "field" }, h("label", { for: id }, title), input, hint), name: field.name, read };
}

async function controls(meta, typeName, prefix = "") {
  const type = await meta.type(typeName);
  const fields = type.inputFields.filter((f) => !(prefix === "" && FILLED.has(f.name)));
  return Promise.all(fields.map((f) => control(meta, f, prefix)));
}

function collect(list) {
  const out = {};
  for (const c of list) {
    const value = c.read();
    if (value !== undefined) out[c.name] = value;
  }
  return out;
}

// Whether the mutation takes a required field the page cannot fill itself.
export async function needsInput(meta, mutation) {
  const type = await meta.type(meta.inputTypeOf(mutation));
  return type.inputFields.some((f) => !FILLED.has(f.name) && unwrap(f.type).required && f.defaultValue === null);
}

// A modal dialog; resolves true when confirmed. `body` is a list of elements. Its fields scroll
// between a fixed title and fixed buttons; leaving the page (Back, a link) cancels it.
export function dialog(title, body, { confirm = "OK", danger = false } = {}) {
  const id = `d${++formIds}`;
  const form = h(
    "form",
    { method: "dialog" },
    h("h2", { id }, title),
    h("div", { class: "dialog-body" }, body),
    h(
      "p",
      { class: "actions" },
      h("button", { value: "cancel", formnovalidate: true }, "Cancel"),
      h("button", { value: "ok", class: danger ? "danger" : "primary" }, confirm),
    ),
  );
  const box = h("dialog", { "aria-labelledby": id }, form);
  document.body.append(box);
  box.showModal();
  const leave = () => box.close("cancel");
  window.addEventListener("hashchange", leave);
  return new Promise((resolve) => {
    box.addEventListener("close", () => {
      window.removeEventListener("hashchange", leave);
      resolve(box.returnValue === "ok");
      box.remove();
    });
  });
}

// Asks for a mutation's own input fields in a dialog; null when cancelled.
export async function ask(meta, mutation, title, { intro = null, confirm = "OK", danger = false } = {}) {
  const list = await controls(meta, meta.inputTypeOf(mutation));
  const ok = await dialog(title, [intro ? h("p", {}, intro) : null, list.map((c) => c.element)], { confirm, danger });
  return ok ? collect(list) : null;
}
