// What the page learns from the server instead of listing it itself: the lifecycles (states,
// their descriptions, moves and the mutation of each) from the `protocol` query, and the
// shapes of inputs, enums and optional features from introspection.

const TYPE_REF = "kind name ofType { kind name ofType { kind name ofType { kind name } } }";

const TYPE = `
query BoardType($name: String!) {
  __type(name: $name) {
    name kind
    fields { name type { ${TYPE_REF} } args { name type { ${TYPE_REF} } } }
    inputFields { name description defaultValue type { ${TYPE_REF} } }
    enumValues { name description }
    possibleTypes { name }
  }
}`;

const LIFECYCLE = `
  states { name description terminal initial note inBaton movesTo reachedFrom }
  moves { name from to mutation actor }`;

// The named type with no list or non-null wrapper, and whether it was required.
export function unwrap(ref) {
  let required = false;
  let list = false;
  let t = ref;
  while (t.kind === "NON_NULL" || t.kind === "LIST") {
    if (t.kind === "NON_NULL" && !list) required = true;
    if (t.kind === "LIST") list = true;
    t = t.ofType;
  }
  return { name: t.name, kind: t.kind, required, list };
}

export class Meta {
  constructor(api) {
    this.api = api;
    this.types = new Map();
  }

  async load() {
    const [data, mutation, run, protocolType] = await Promise.all([
      this.api.request(`query BoardMeta {
        viewer { kind handle owner }
        protocol { handoff { ${LIFECYCLE} } }
        retention { keepSeconds }
      }`),
      this.type("Mutation"),
      this.type("Run"),
      this.type("Protocol"),
    ]);
    this.viewer = data.viewer;
    this.handoff = data.protocol.handoff;
    // How long finished work is kept (BATON_RETENTION), in seconds; null: for ever.
    this.keepSeconds = data.retention.keepSeconds;
    this.mutations = new Map(mutation.fields.map((f) => [f.name, f]));
    // Pipeline runs light up once the server has them (API.md section 6).
    const lifecycles = protocolType.fields.map((f) => f.name);
    this.runs = run !== null && lifecycles.includes("pipeline") && this.mutations.has("provideUserInput");
    if (this.runs) {
      const pipeline = await this.api.request(`query BoardPipeline {
        protocol { pipeline { ${LIFECYCLE} } }
      }`);
      this.pipeline = pipeline.protocol.pipeline;
    }
    return this;
  }

  // Introspection of one named type (cached), or null when the schema has no such type.
  async type(name) {
    if (!this.types.has(name)) {
      this.types.set(
        name,
        this.api.request(TYPE, { name }).then((d) => d.__type),
      );
    }
    return this.types.get(name);
  }

  async enumValues(name) {
    return ((await this.type(name))?.enumValues ?? []).map((v) => v.name);
  }

  // When a task that finished at `finishedAt` (its last change) is removed, or null if never.
  removedAt(finishedAt) {
    if (this.keepSeconds === null) return null;
    return new Date(new Date(finishedAt).getTime() + this.keepSeconds * 1000).toISOString();
  }

  // The retention period in words: "90 days", "12 hours".
  kept() {
    const s = this.keepSeconds;
    if (s === null) return null;
    for (const [unit, size] of [["day", 86400], ["hour", 3600], ["minute", 60]]) {
      if (s >= size && s % size === 0) return `${s / size} ${unit}${s === size ? "" : "s"}`;
    }
    return `${s} second${s === 1 ? "" : "s"}`;
  }

  state(name) {
    return this.handoff.states.find((s) => s.name === name);
  }

  // The handoff move named `name` (any of its (from, to) pairs: they share a mutation).
  move(name) {
    return this.handoff.moves.find((m) => m.name === name);
  }

  // The input type a mutation takes as `input`.
  inputTypeOf(mutation) {
    const field = this.mutations.get(mutation);
    const arg = field?.args.find((a) => a.name === "input");
    return arg ? unwrap(arg.type).name : null;
  }

  // The union a mutation answers with.
  resultTypeOf(mutation) {
    return unwrap(this.mutations.get(mutation).type).name;
  }

  // The fields of a type that the server has, out of `wanted`.
  async fieldsOf(typeName, wanted) {
    const type = await this.type(typeName);
    const have = new Set((type?.fields ?? []).map((f) => f.name));
    return wanted.filter((name) => have.has(name.split(/[\s{(]/)[0]));
  }
}
