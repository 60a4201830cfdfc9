"""What the browser tests read off the page, as JavaScript run by Playwright's `evaluate`."""

# The WCAG 2 contrast ratio of an element's text against its effective background, measured
# as the browser paints it. The background is every ancestor's computed background-color,
# from the element up to the first opaque one (white, the page's canvas, if none is),
# composited on a 1x1 canvas; the text colour is composited over that. The canvas parses
# whatever getComputedStyle returns (rgb(), rgba(), color(srgb ...) from color-mix).
CONTRAST = """(element) => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const paint = (color) => {
    ctx.fillStyle = '#010203';
    ctx.fillStyle = color;
    if (ctx.fillStyle === '#010203' && color.replace(/\\s/g, '') !== 'rgb(1,2,3)') {
      throw new Error(`the canvas cannot parse the colour ${color}`);
    }
    ctx.fillRect(0, 0, 1, 1);
  };
  const pixel = () => [...ctx.getImageData(0, 0, 1, 1).data];
  const alpha = (color) => { ctx.clearRect(0, 0, 1, 1); paint(color); return pixel()[3]; };
  const layers = [];
  for (let e = element; e; e = e.parentElement) {
    const background = getComputedStyle(e).backgroundColor;
    const a = alpha(background);
    if (a > 0) layers.push(background);
    if (a === 255) break;
  }
  ctx.clearRect(0, 0, 1, 1);
  paint('#ffffff');
  layers.reverse().forEach(paint);
  const background = pixel().slice(0, 3);
  const color = getComputedStyle(element).color;
  paint(color);
  const text = pixel().slice(0, 3);
  const luminance = (rgb) => rgb.map((v) => v / 255)
    .map((c) => (c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const [hi, lo] = [luminance(text), luminance(background)].sort((a, b) => b - a);
  const hex = (rgb) => '#' + rgb.map((v) => v.toString(16).padStart(2, '0')).join('');
  const { fontSize, fontWeight } = getComputedStyle(element);
  return { ratio: (hi + 0.05) / (lo + 0.05), text: hex(text), background: hex(background),
           color, layers, fontSize, fontWeight, content: element.textContent.trim().slice(0, 60) };
}"""

# The mapping table as the page shows it, read in one go: the header, the rows (data-node,
# cell texts, whether selected), the count text and the op_type filter's options.
READ_TABLE = """() => {
  const root = [...document.querySelectorAll('.ncet-mapping-table')]
    .find((e) => e.offsetParent !== null) || document.querySelector('.ncet-mapping-table');
  const table = root.querySelector('table.ncet-mapping');
  return {
    head: [...table.querySelectorAll('thead th')].map(th => th.textContent.trim()),
    sorted: [...table.querySelectorAll('thead th[aria-sort]')]
      .map(th => [th.dataset.sort, th.getAttribute('aria-sort')]),
    rows: [...table.querySelectorAll('tbody tr')].map(tr => ({
      node: tr.dataset.node,
      cells: [...tr.querySelectorAll('td')].map(td => td.textContent.trim()),
      selected: tr.classList.contains('ncet-selected'),
    })),
    count: root.querySelector('.ncet-count').textContent.trim(),
    options: [...root.querySelectorAll('.ncet-filter-op-type select option')]
      .map(o => o.textContent.trim()),
  };
}"""

# True once the count text differs from `before` and the table shows `rows` rows.
CHANGED = """([before, rows]) => {
  const root = document.querySelector('.ncet-mapping-table');
  return root.querySelector('.ncet-count').textContent.trim() !== before
    && root.querySelectorAll('table.ncet-mapping tbody tr').length === rows;
}"""

# The graph canvas's open groups, in the SVG's order: each cluster's id (without "g:") and the
# top of its frame on the page (the frames are drawn, and panned or zoomed, together, so their
# order on the page is their order in the drawing).
CLUSTER_TOPS = """(canvas) => [...canvas.querySelectorAll('g.cluster')].map(
  (g) => [g.id.slice(2), g.querySelector('rect').getBoundingClientRect().top])"""
