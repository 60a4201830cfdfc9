"""The figure of one adjudication: the output against the unsafe set on 2-D slices
(`unsafe_slice.Slice`), one panel per pair of outputs: the unsafe region of the slice
shaded, the exact output (a dot), each float32 run's output (a cross) and the claimed Y (a
diamond), the margin in the title. Styled as the other figures (`plots.RC`, `figure_svg`).

The artists carry fixed gids (`GIDS`), so a test reads the drawn coordinates back.
"""

from __future__ import annotations

from .plots import COLORS, new_figure, styled
from .tables import number
from .unsafe_slice import Slice

GIDS = {"unsafe": "ncet-unsafe", "exact": "ncet-exact", "float32": "ncet-float32",
        "claimed": "ncet-claimed"}
"""The gid of each kind of artist (float32 runs: "ncet-float32-<i>")."""

MARKERS = {"exact": ("o", COLORS["local"]), "float32": ("x", COLORS["e2e"]),
           "claimed": ("D", "#7c3aed")}
"""(marker, colour) per kind of point."""

RUN_MARKERS = ("x", "+", "1", "2")
"""The float32 runs' markers, in run order."""


def _view(s: Slice) -> tuple[float, float, float, float]:
    """(u0, u1, v0, v1): centred on the exact output, wide enough for every point and the
    nearest boundary line of the slice."""
    eu, ev = s.exact
    points = [p for _, p in s.float32] + ([s.claimed] if s.claimed else [])
    spread = max([abs(u - eu) for u, _ in points] + [abs(v - ev) for _, v in points] + [0.0])
    near = []
    for rows in s.polytopes:
        for a, b, rhs, _ in rows:
            norm = (float(a) ** 2 + float(b) ** 2) ** 0.5
            if norm > 0:
                near.append(abs(float(a) * eu + float(b) * ev - float(rhs)) / norm)
    half = max(spread, min(near, default=0.0)) * 1.6
    if not half > 0:
        half = max(abs(eu), abs(ev), 1.0) * 1e-6
    return eu - half, eu + half, ev - half, ev + half


def region(s: Slice, view: tuple[float, float, float, float]) -> list[list[tuple]]:
    """The shaded region inside the view: one convex polygon per polytope (empty ones left
    out), the view's rectangle clipped by each row (Sutherland-Hodgman, in floats)."""
    u0, u1, v0, v1 = view
    polygons = []
    for rows in s.polytopes:
        poly = [(u0, v0), (u1, v0), (u1, v1), (u0, v1)]
        for a, b, rhs, strict in rows:
            if a == 0 and b == 0:  # the other outputs decide this row alone
                poly = poly if (rhs > 0 if strict else rhs >= 0) else []
                continue
            poly = _clip(poly, float(a), float(b), float(rhs))
            if not poly:
                break
        if len(poly) >= 3:
            polygons.append(poly)
    return polygons


def _clip(poly, a: float, b: float, rhs: float) -> list[tuple]:
    out = []
    for i, p in enumerate(poly):
        q = poly[(i + 1) % len(poly)]
        fp, fq = a * p[0] + b * p[1] - rhs, a * q[0] + b * q[1] - rhs
        if fp <= 0:
            out.append(p)
        if (fp < 0 < fq) or (fq < 0 < fp):
            t = fp / (fp - fq)
            out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def _where(s: Slice, point) -> str:
    return "inside" if s.contains(point) else "outside"


@styled
def adjudication_figure(slices: list[Slice], left_out: int = 0, width: float = 4.4,
                        height: float = 3.8):
    """One panel per slice (two per row): the unsafe region, the exact output, the float32
    outputs and the claimed Y; the legend says which lie inside the shaded region.

    Args:
        slices: From `unsafe_slices` (or `slices_of`).
        left_out: How many pairs were not drawn (said in the first panel's title).
        width: Width of one panel in inches.
        height: Height of one panel in inches.

    Returns:
        A matplotlib Figure.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: no slices.
    """
    from matplotlib.patches import Polygon
    from matplotlib.ticker import MaxNLocator

    if not slices:
        raise ValueError("no slices to draw: unsafe_slices gives at least one")
    cols = min(len(slices), 2)
    rows = (len(slices) + cols - 1) // cols
    figure, axes = new_figure(width * cols, height * rows, rows, cols)
    for i, axis in enumerate(axes.flat):
        if i >= len(slices):
            axis.set_visible(False)
            continue
        s = slices[i]
        view = _view(s)
        for n, poly in enumerate(region(s, view)):
            axis.add_patch(Polygon(poly, closed=True, facecolor="#dc26262e",
                                   edgecolor=COLORS["violation"], linewidth=0.8, zorder=1,
                                   gid=f"{GIDS['unsafe']}-{n}",
                                   label="unsafe set (this slice)" if n == 0 else None))
        marker, color = MARKERS["exact"]
        axis.scatter([s.exact[0]], [s.exact[1]], s=36, marker=marker, color=color, zorder=3,
                     gid=GIDS["exact"], label=f"exact output ({_where(s, s.exact)})")
        for r, (runtime, point) in enumerate(s.float32):
            axis.scatter([point[0]], [point[1]], s=60, marker=RUN_MARKERS[r % 4],
                         color=MARKERS["float32"][1], linewidths=1.4, zorder=4,
                         gid=f"{GIDS['float32']}-{r}",
                         label=f"float32, {runtime.split(' (')[0]} ({_where(s, point)})")
        if s.claimed is not None:
            marker, color = MARKERS["claimed"]
            axis.scatter([s.claimed[0]], [s.claimed[1]], s=50, marker=marker,
                         facecolors="none", edgecolors=color, linewidths=1.2, zorder=5,
                         gid=GIDS["claimed"], label=f"claimed Y ({_where(s, s.claimed)})")
        axis.set_xlim(view[0], view[1])
        axis.set_ylim(view[2], view[3])
        axis.set_xlabel(s.label(0))
        if s.pair[1] is None:
            axis.set_yticks([])
        else:
            axis.set_ylabel(s.label(1))
        axis.xaxis.set_major_locator(MaxNLocator(4))
        axis.yaxis.set_major_locator(MaxNLocator(5))
        plane = s.label(0) if s.pair[1] is None else f"{s.label(0)} against {s.label(1)}"
        title = f"{plane}: exact margin {number(s.margin)}"
        if s.wide:
            title += "\na row involves more than two outputs: its two largest coefficients"
        if i == 0 and left_out:
            title += f"\n({left_out} more pair{'s' if left_out > 1 else ''} not drawn)"
        axis.set_title(title, loc="left", fontsize=9)
        axis.legend(loc="best", fontsize=7)
        axis.grid(color=COLORS["grid"], linewidth=0.5)
    return figure


def drawn_points(figure) -> list[dict[str, tuple[float, float]]]:
    """Per panel, the coordinates of each marked point by gid (what a test reads back)."""
    out = []
    for axis in figure.axes:
        if not axis.get_visible():
            continue
        out.append({c.get_gid(): tuple(float(v) for v in c.get_offsets()[0])
                    for c in axis.collections if c.get_gid()})
    return out
