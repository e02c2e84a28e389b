// The dependency graph around one task, laid out by dagre (layered, for directed graphs) in a
// worker and drawn as SVG: node colour and a text label by state, cycles drawn dashed and listed,
// dependencies that name no visible task drawn as such. Colours follow live events.

import { count, h, label, s, words } from "../dom.js";
import { taskLink } from "../tasks.js";

// The server stops a graph at `first` tasks and says so with `truncated`.
const LIMIT = 1000;
const QUERY = `query BoardGraph($ids: [ID!]!, $direction: GraphDirection!, $depth: Int!, $first: Int!) {
  taskGraph(ids: $ids, direction: $direction, depth: $depth, first: $first) {
    nodes { id state version waitingOn packet { task dependsOn } }
    edges { from to }
    cycles
    unresolved
    truncated
  }
}`;

const WIDTH = 190;
const HEIGHT = 58;
const MISSING = "missing:"; // prefix of the layout ids of unresolved dependencies

// A cycle as the server lists it (each id depends on the next) in the page's arrow sense
// (A → B: B depends on A), closed: [a, c, b] -> [a, b, c, a].
function arrows(cycle) {
  return [cycle[0], ...cycle.slice(1).reverse(), cycle[0]];
}

function short(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

export function mount(ctx, root, params, id) {
  let closed = false;
  const nodes = new Map(); // task id -> { task, el }
  const workers = new Set();
  const direction = params.get("direction") ?? "BOTH";
  const depth = Number(params.get("depth") ?? 3);

  const directionSelect = h("select", { id: "graph-direction", name: "direction" });
  ctx.meta.enumValues("GraphDirection").then((values) => {
    for (const v of values) directionSelect.append(h("option", { value: v, selected: v === direction }, label(v.toLowerCase())));
  });
  const depthInput = h("input", { id: "graph-depth", name: "depth", type: "number", min: 1, max: 50, value: depth });
  const form = h(
    "form",
    {
      class: "filters",
      "aria-label": "Graph options",
      onsubmit: (e) => {
        e.preventDefault();
        const next = new URLSearchParams({ direction: directionSelect.value, depth: depthInput.value });
        location.hash = `#/graph/${encodeURIComponent(id)}?${next}`;
      },
    },
    h("p", { class: "field" }, h("label", { for: "graph-direction" }, "Direction"), directionSelect),
    h("p", { class: "field" }, h("label", { for: "graph-depth" }, "Depth (hops)"), depthInput),
    h("p", { class: "field buttons" }, h("button", { class: "primary" }, "Draw")),
  );
  const message = h("p", { class: "message", role: "status" });
  const summary = h("p", { class: "meta", id: "graph-summary" });
  const svg = s("svg", { class: "graph", role: "group", "aria-label": `Dependency graph around ${id}`, id: "graph" });
  const zoom = (factor) => () => view.zoom(factor);
  const tools = h(
    "p",
    { class: "actions", role: "group", "aria-label": "Zoom" },
    h("button", { type: "button", onclick: zoom(1.25) }, "Zoom in"),
    h("button", { type: "button", onclick: zoom(0.8) }, "Zoom out"),
    h("button", { type: "button", onclick: () => view.fit() }, "Fit"),
  );
  const details = h("div", { class: "task-body" });
  root.replaceChildren(
    h("p", { class: "crumbs" }, h("a", { href: "#/board" }, "Board"), " / ", h("a", { href: taskLink({ id }) }, id), " / graph"),
    h("h1", {}, "Dependency graph"),
    form,
    message,
    summary,
    h("p", { class: "meta" }, "An arrow A → B means B depends on A. Dashed red outlines and arrows are dependency cycles; dashed grey boxes are dependencies that name no task you can see."),
    tools,
    svg,
    details,
  );

  const view = panZoom(svg);

  function paint(node) {
    const { task, el } = node;
    el.setAttribute("class", `node state-${task.state}`);
    el.querySelector(".state-text").textContent = task.waitingOn ? `${label(task.state)}: ${words(task.waitingOn)}` : label(task.state);
    el.setAttribute("aria-label", `${task.id}, ${label(task.state)}: ${task.packet.task}`);
  }

  // Past this many nodes, dagre's faster ranking and no crossing reduction: the full
  // treatment takes seconds at 500 nodes, this well under one.
  const LARGE = 150;

  function layout(graph) {
    const unresolved = new Set(graph.unresolved);
    const boxes = graph.nodes.map((t) => ({ id: t.id, width: WIDTH, height: HEIGHT }));
    const edges = graph.edges.map((e) => [e.to, e.from]); // the dependency first: A → B, B depends on A
    for (const task of graph.nodes) {
      for (const dep of task.packet.dependsOn) {
        if (!unresolved.has(dep)) continue;
        boxes.push({ id: MISSING + dep, width: WIDTH, height: 40 });
        edges.push([MISSING + dep, task.id]);
      }
    }
    const large = boxes.length > LARGE;
    const worker = new Worker(new URL("../layout-worker.js", import.meta.url), { type: "module" });
    workers.add(worker);
    return new Promise((resolve, reject) => {
      worker.onmessage = ({ data }) => resolve(data);
      worker.onerror = (event) => reject(new Error(event.message || "the layout failed"));
      worker.postMessage({
        nodes: boxes,
        edges,
        graph: { rankdir: "LR", nodesep: 16, ranksep: 70, marginx: 20, marginy: 20, ranker: large ? "longest-path" : "network-simplex" },
        options: { disableOptimalOrderHeuristic: large },
      });
    }).finally(() => {
      worker.terminate();
      workers.delete(worker);
    });
  }

  function draw(graph, placed) {
    const t1 = performance.now();
    const unresolved = new Set(graph.unresolved);
    const cycleOf = new Map();
    graph.cycles.forEach((cycle, i) => cycle.forEach((n) => cycleOf.set(n, i)));
    const edges = s("g", { class: "edges" });
    for (const e of placed.edges) {
      const d = e.points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
      const inCycle = cycleOf.has(e.v) && cycleOf.get(e.v) === cycleOf.get(e.w);
      const missing = e.v.startsWith(MISSING);
      edges.append(s("path", { d, class: inCycle ? "edge cycle" : missing ? "edge missing" : "edge", "marker-end": inCycle ? "url(#arrow-cycle)" : "url(#arrow)" }));
    }
    const group = s("g", { class: "nodes" });
    nodes.clear();
    for (const task of graph.nodes) {
      const box = placed.nodes[task.id];
      const cycle = cycleOf.has(task.id);
      const el = s(
        "a",
        { href: taskLink(task), transform: `translate(${box.x - WIDTH / 2},${box.y - HEIGHT / 2})`, dataset: { taskId: task.id } },
        s("rect", { width: WIDTH, height: HEIGHT, rx: 6, class: cycle ? "box in-cycle" : task.id === id ? "box root" : "box" }),
        s("text", { x: 8, y: 17, class: "id" }, `${cycle ? "⟳ " : ""}${task.id === id ? "★ " : ""}${short(task.id, 24)}`),
        s("text", { x: 8, y: 34, class: "title" }, short(task.packet.task, 28)),
        s("text", { x: 8, y: 50, class: "state-text" }),
      );
      nodes.set(task.id, { task, el });
      paint(nodes.get(task.id));
      group.append(el);
    }
    for (const dep of unresolved) {
      const box = placed.nodes[MISSING + dep];
      if (!box) continue;
      group.append(
        s(
          "g",
          { class: "node missing", transform: `translate(${box.x - WIDTH / 2},${box.y - 20})`, role: "img", "aria-label": `Unresolved dependency ${dep}` },
          s("rect", { width: WIDTH, height: 40, rx: 6, class: "box" }),
          s("text", { x: 8, y: 16, class: "id" }, "unresolved"),
          s("text", { x: 8, y: 32, class: "title" }, short(dep, 28)),
        ),
      );
    }
    svg.replaceChildren(
      s(
        "defs",
        {},
        s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" })),
        s("marker", { id: "arrow-cycle", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow cycle" })),
      ),
      edges,
      group,
    );
    view.setSize(placed.width, placed.height);
    const t2 = performance.now();
    performance.measure("baton:graph-draw", { start: t1, end: t2 });
    return t2 - t1;
  }

  function lists(graph) {
    const link = (n) => h("a", { href: taskLink({ id: n }) }, n);
    details.replaceChildren(
      h(
        "section",
        { class: "panel", "aria-labelledby": "cycles-title" },
        h("h2", { id: "cycles-title" }, `Cycles (${graph.cycles.length})`),
        graph.cycles.length
          ? h("ul", { id: "cycles" }, graph.cycles.map((c) => h("li", {}, arrows(c).map((n, i) => [i ? " → " : "", link(n)]))))
          : h("p", { class: "empty" }, "No dependency cycles."),
      ),
      h(
        "section",
        { class: "panel", "aria-labelledby": "unresolved-title" },
        h("h2", { id: "unresolved-title" }, `Unresolved dependencies (${graph.unresolved.length})`),
        graph.unresolved.length ? h("ul", { id: "unresolved" }, graph.unresolved.map((u) => h("li", {}, h("code", {}, u)))) : h("p", { class: "empty" }, "Every dependency names a task you can see."),
      ),
      h(
        "section",
        { class: "panel", "aria-labelledby": "nodes-title" },
        h("details", {}, h("summary", { id: "nodes-title" }, `All ${graph.nodes.length} tasks as a list`), h("ul", {}, graph.nodes.map((t) => h("li", {}, link(t.id), ` · ${label(t.state)} · ${t.packet.task}`)))),
      ),
    );
  }

  async function load() {
    message.textContent = "Loading…";
    try {
      const data = await ctx.api.request(QUERY, { ids: [id], direction, depth, first: LIMIT });
      if (closed) return;
      const graph = data.taskGraph;
      message.textContent = "";
      if (!graph.nodes.length) {
        message.textContent = `There is no task ${id}, or you may not see it.`;
        return;
      }
      lists(graph);
      message.textContent = `Laying out ${graph.nodes.length} tasks…`;
      const t0 = performance.now();
      const placed = await layout(graph);
      if (closed) return;
      performance.measure("baton:graph-layout", { start: t0, end: performance.now() });
      message.textContent = "";
      const drawMs = draw(graph, placed);
      const cut = graph.truncated ? ` (stopped at ${LIMIT}; a smaller depth shows all of a part)` : "";
      summary.textContent = `${count(graph.nodes.length, "task")}${cut}, ${count(graph.edges.length, "dependency", "dependencies")}, ${count(graph.cycles.length, "cycle")}, ${graph.unresolved.length.toLocaleString()} unresolved · laid out in ${Math.round(performance.now() - t0 - drawMs)} ms, drawn in ${Math.round(drawMs)} ms`;
      root.dataset.ready = "true";
    } catch (error) {
      message.textContent = ctx.problem(error);
    }
  }

  const stop = ctx.events.on((event) => {
    const node = nodes.get(event.taskId);
    if (!node || node.task.version >= event.version) return;
    node.task = { ...node.task, state: event.task.state, waitingOn: event.task.waitingOn, version: event.version };
    paint(node);
  });
  load();
  return () => {
    closed = true;
    stop();
    for (const worker of workers) worker.terminate();
  };
}

// Pan (drag, arrow keys) and zoom (wheel, +/-, buttons) by moving the SVG's viewBox.
function panZoom(svg) {
  let box = { x: 0, y: 0, w: 100, h: 100 };
  let full = box;
  let widest = 100; // the fitted view's width: zooming out stops at twice that
  const apply = () => {
    svg.setAttribute("viewBox", `${box.x} ${box.y} ${box.w} ${box.h}`);
    // Zoomed far out, text is too small to read and costs most of each frame: leave it out.
    svg.classList.toggle("far", svg.clientWidth / box.w < 0.4);
  };
  const zoom = (factor, cx = box.x + box.w / 2, cy = box.y + box.h / 2) => {
    const w = Math.min(Math.max(box.w / factor, 100), widest * 2);
    const k = w / box.w;
    box = { x: cx - (cx - box.x) * k, y: cy - (cy - box.y) * k, w, h: box.h * k };
    apply();
  };
  const fit = () => {
    const rect = svg.getBoundingClientRect();
    const aspect = rect.height / Math.max(rect.width, 1);
    // Never enlarged past its own size: a graph of two tasks is not drawn in giant letters.
    const w = Math.max(full.w, full.h / aspect, rect.width);
    box = { x: (full.w - w) / 2, y: (full.h - w * aspect) / 2, w, h: w * aspect };
    widest = w;
    apply();
  };
  svg.setAttribute("tabindex", "0");
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const rect = svg.getBoundingClientRect();
    const cx = box.x + ((e.clientX - rect.left) / rect.width) * box.w;
    const cy = box.y + ((e.clientY - rect.top) / rect.height) * box.h;
    zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, cx, cy);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    if (e.target.closest("a")) return;
    drag = { x: e.clientX, y: e.clientY, box };
    svg.setPointerCapture(e.pointerId);
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const rect = svg.getBoundingClientRect();
    const k = box.w / rect.width;
    box = { ...drag.box, x: drag.box.x - (e.clientX - drag.x) * k, y: drag.box.y - (e.clientY - drag.y) * k };
    apply();
  });
  svg.addEventListener("pointerup", () => {
    drag = null;
  });
  svg.addEventListener("keydown", (e) => {
    const step = box.w / 10;
    const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
    if (e.target !== svg) return;
    if (moves[e.key]) {
      box = { ...box, x: box.x + moves[e.key][0], y: box.y + moves[e.key][1] };
      apply();
    } else if (e.key === "+" || e.key === "=") zoom(1.25);
    else if (e.key === "-") zoom(0.8);
    else if (e.key === "0") fit();
    else return;
    e.preventDefault();
  });
  return {
    zoom,
    fit,
    setSize(w, h) {
      full = { x: 0, y: 0, w, h };
      fit();
    },
  };
}
