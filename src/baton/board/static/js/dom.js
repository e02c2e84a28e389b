// Small DOM helpers: elements are built with h(), text is always set as text (never parsed
// as HTML), so nothing a task carries can inject markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = "http://www.w3.org/2000/svg";

export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

// Only http(s) links become links; anything else is shown as text.
export function safeLink(url) {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") {
      return h("a", { href: parsed.href, rel: "noopener noreferrer", target: "_blank" }, url);
    }
  } catch {
    // not a URL: shown as text below
  }
  return h("code", {}, url);
}

// "1 cycle", "2 cycles": a count with its noun.
export function count(n, one, many = `${one}s`) {
  return `${n.toLocaleString()} ${n === 1 ? one : many}`;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// Screen readers hear `message` once; the element is polite so it does not interrupt.
export function announce(message) {
  const region = document.getElementById("announce");
  region.textContent = "";
  setTimeout(() => {
    region.textContent = message;
  }, 50);
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return date.toLocaleString(undefined, {
    dateStyle: "medium",
    timeStyle: "medium",
  });
}

export function ago(iso) {
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 60) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.round(hours / 24)} days ago`;
}

// "owner_approval" -> "owner approval"
export function words(name) {
  return String(name).replaceAll("_", " ");
}

export function label(name) {
  const text = words(name);
  return text.charAt(0).toUpperCase() + text.slice(1);
}

// Collapses calls within `ms` into one, run after the last of them.
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
