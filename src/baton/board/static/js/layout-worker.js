// Lays out a graph with dagre off the page's main thread, so the page stays responsive
// while a large graph is laid out. In: { nodes: [{id, width, height}], edges: [[v, w]],
// graph: dagre's graph options, options: dagre's layout options }. Out: positions.

import { graphlib, layout } from "../vendor/dagre-3.1.3/dagre.esm.js";

self.onmessage = ({ data }) => {
  const g = new graphlib.Graph();
  g.setGraph(data.graph);
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of data.nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const [v, w] of data.edges) g.setEdge(v, w);
  const started = performance.now();
  layout(g, data.options);
  const { width, height } = g.graph();
  self.postMessage({
    ms: performance.now() - started,
    width,
    height,
    nodes: Object.fromEntries(g.nodes().map((id) => [id, { x: g.node(id).x, y: g.node(id).y }])),
    edges: g.edges().map((e) => ({ v: e.v, w: e.w, points: g.edge(e).points })),
  });
};
