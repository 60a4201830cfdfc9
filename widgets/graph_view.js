// The GraphView's canvas (an anywidget ESM): shows the SVG laid out in the kernel
// (ncet/render/graph_layout.py, the same drawing as the static forms), pans (drag) and zooms
// (wheel, buttons) it by its viewBox, and sends clicks back:
// a node sets `selected`, a collapsed group's box opens it, a group's title closes it.

const MIN_READABLE = 0.75; // the first view is never smaller than this (labels stay legible)
const DRAG_PX = 4; // a pointer that moved further than this was a drag, not a click

function render({ model, el }) {
  el.classList.add("ncet-graph-canvas");
  const bar = document.createElement("div");
  bar.className = "ncet-graph-tools";
  const holder = document.createElement("div");
  holder.className = "ncet-graph-holder";
  el.append(bar, holder);
  const button = (text, title, cls, action) => {
    const b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.className = cls;
    b.addEventListener("click", action);
    bar.append(b);
  };
  let svg = null, box = null, view = null;
  // A canvas in a hidden tab has no size, and getBBox() gives nothing there: what needs the
  // size (the first view, centring on a selection) waits until the canvas is shown.
  let pending = [];
  const visible = () => holder.clientWidth > 0 && holder.clientHeight > 0;
  const whenVisible = (action) => { if (visible()) action(); else pending.push(action); };
  const observer = new ResizeObserver(() => {
    if (!visible() || !pending.length) return;
    const actions = pending;
    pending = [];
    actions.forEach((action) => action());
  });
  observer.observe(holder);

  const apply = () => {
    if (svg) svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  };
  const size = () => [holder.clientWidth || 800, holder.clientHeight || 560];
  const scaleNow = () => size()[0] / view.w;
  const show = (x, y, scale) => { // (x, y): the SVG point to put at the centre
    const [cw, ch] = size();
    view = { x: x - cw / scale / 2, y: y - ch / scale / 2, w: cw / scale, h: ch / scale };
    apply();
  };
  const fit = () => {
    const [cw, ch] = size();
    const scale = Math.min(cw / box.w, ch / box.h);
    show(box.x + box.w / 2, box.y + box.h / 2, scale);
  };
  const first = () => { // fit when labels stay legible, else the top of the graph, legible
    const [cw, ch] = size();
    if (Math.min(cw / box.w, ch / box.h) >= MIN_READABLE) return fit();
    const s = Math.max(MIN_READABLE, Math.min(cw / box.w, 1));
    show(box.x + box.w / 2, box.y + ch / s / 2, s);
  };
  const zoom = (factor, px, py) => { // keep the SVG point under (px, py) in place
    const [cw, ch] = size();
    const fx = px ?? cw / 2, fy = py ?? ch / 2;
    const x = view.x + (fx / cw) * view.w, y = view.y + (fy / ch) * view.h;
    view.w /= factor; view.h /= factor;
    view.x = x - (fx / cw) * view.w; view.y = y - (fy / ch) * view.h;
    apply();
  };
  const find = (id) => holder.querySelector(`[id="${CSS.escape(id)}"]`);
  const centreOn = (element, keep) => {
    if (!view) first();
    const b = element.getBBox(); // in the graph's coordinates: translate to the SVG's
    const g = svg.querySelector("g.graph");
    const m = g && g.transform.baseVal.consolidate();
    const dx = m ? m.matrix.e : 0, dy = m ? m.matrix.f : 0;
    const x = b.x + b.width / 2 + dx, y = b.y + b.height / 2 + dy;
    const inside = x > view.x && x < view.x + view.w && y > view.y && y < view.y + view.h;
    if (!(keep && inside)) show(x, y, Math.max(scaleNow(), MIN_READABLE));
  };
  const mark = (centre) => {
    holder.querySelectorAll(".ncet-selected").forEach((e) => e.classList.remove("ncet-selected"));
    const name = model.get("selected");
    const element = name ? find("n:" + name) : null;
    if (!element) return;
    element.classList.add("ncet-selected");
    if (centre) {
      whenVisible(() => {
        const shown = find("n:" + name); // the SVG may have been drawn again meanwhile
        if (shown && model.get("selected") === name) centreOn(shown, true);
      });
    }
  };
  const draw = () => {
    const focus = model.get("focus");
    const scale = view ? scaleNow() : null;
    holder.innerHTML = model.get("svg");
    svg = holder.querySelector("svg");
    if (!svg) return;
    const vb = svg.viewBox.baseVal;
    box = { x: vb.x, y: vb.y, w: vb.width || 1, h: vb.height || 1 };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    pending = [];
    whenVisible(() => {
      const target = focus ? find(focus) : null;
      if (target && scale) {
        view = { x: 0, y: 0, w: 1, h: 1 };
        show(0, 0, scale);
        centreOn(target, false);
      } else {
        first();
      }
    });
    mark(false);
  };

  button("+", "zoom in", "ncet-graph-zoom-in", () => zoom(1.25));
  button("−", "zoom out", "ncet-graph-zoom-out", () => zoom(0.8));
  button("fit", "fit the whole graph", "ncet-graph-fit", () => fit());

  let down = null, moved = false;
  holder.addEventListener("wheel", (event) => {
    if (!view) return;
    event.preventDefault();
    const r = holder.getBoundingClientRect();
    zoom(Math.exp(-event.deltaY * 0.0015), event.clientX - r.left, event.clientY - r.top);
  }, { passive: false });
  holder.addEventListener("pointerdown", (event) => {
    if (!view || event.button !== 0) return;
    down = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y };
    moved = false;
  });
  holder.addEventListener("pointermove", (event) => {
    if (!down) return;
    const dx = event.clientX - down.x, dy = event.clientY - down.y;
    if (!moved && Math.hypot(dx, dy) < DRAG_PX) return;
    if (!moved) holder.setPointerCapture(event.pointerId);
    moved = true;
    const s = scaleNow();
    view.x = down.vx - dx / s; view.y = down.vy - dy / s;
    apply();
  });
  holder.addEventListener("pointerup", (event) => {
    const wasDrag = moved;
    down = null; moved = false;
    if (wasDrag) return;
    const hit = event.target.closest("g.node, g.cluster");
    if (!hit || !hit.id) return;
    if (hit.id.startsWith("n:")) {
      model.set("selected", hit.id.slice(2));
      model.save_changes();
    } else if (hit.id.startsWith("g:")) {
      const closing = hit.classList.contains("cluster");
      if (closing && !event.target.closest("text")) return; // a cluster closes by its title
      model.send({ event: "toggle", group: hit.id.slice(2) });
    }
  });

  model.on("change:svg", draw);
  model.on("change:selected", () => mark(true));
  draw();
  return () => {
    model.off("change:svg", draw);
    observer.disconnect();
  };
}

export default { render };
