"""Download links for the views: data embedded in the page as a `data:` URI, no server.

A link is an `<a download="name" href="data:<mime>;base64,...">` styled as a small button
(class `ncet-download`). It works in a live notebook, in the saved notebook and in the static
HTML alike, because the bytes travel inside the page. Its HTML is a function of its arguments
only (same bytes, same link), so the views' `to_html()` stays deterministic.

Embedding costs a third more than the data (base64) in the page and in the saved notebook,
so data beyond `MAX_EMBED_BYTES` (4 MB) is not embedded: the link is replaced by a note
saying how large the data is and how to save it from Python instead.
"""

from __future__ import annotations

import base64
import re

import ipywidgets as W

from ncet.render import escape, figure_png, figure_svg

MAX_EMBED_BYTES = 4 * 1024 * 1024
"""The largest download embedded in a page (4 MiB of data, about 5.3 MiB of base64)."""

LINK_STYLE = ("display:inline-block;margin:2px 6px 2px 0;padding:1px 8px;font-size:12px;"
              "line-height:20px;border:1px solid #bbb;border-radius:3px;background:#f5f5f5;"
              "color:#222;text-decoration:none;cursor:pointer")
"""Inline style of a link, so it looks like a small button wherever the HTML is shown."""

SVG_PROLOG = '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n'


def _bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.1f} kB"


def link_html(data: bytes | str, filename: str, mime: str, label: str | None = None) -> str:
    """The HTML of a download link (what `download_link` shows), for static pages.

    Args:
        data: The file's content; a str is encoded as UTF-8.
        filename: The name the browser saves it as.
        mime: Its media type, e.g. "text/csv".
        label: The button's text (default "⤓ <filename>").

    Returns:
        An `<a class="ncet-download">`, or, beyond `MAX_EMBED_BYTES`, a
        `<span class="ncet-download-too-large">` note saying the data was not embedded.
    """
    payload = _bytes(data)
    text = escape(label if label is not None else f"\u2913 {filename}")
    if len(payload) > MAX_EMBED_BYTES:
        return (f'<span class="ncet-download-too-large">{escape(filename)}: '
                f"{_size(len(payload))} is too large to embed in the page (limit "
                f"{_size(MAX_EMBED_BYTES)}); save it from Python instead.</span>")
    encoded = base64.b64encode(payload).decode("ascii")
    return (f'<a class="ncet-download" download="{escape(filename)}" '
            f'href="data:{escape(mime)};base64,{encoded}" style="{LINK_STYLE}">{text}</a>')


def download_link(data: bytes | str, filename: str, mime: str,
                  label: str | None = None) -> W.HTML:
    """A small download button carrying `data` in a `data:` URI.

    Args:
        data: The file's content; a str is encoded as UTF-8.
        filename: The name the browser saves it as.
        mime: Its media type, e.g. "text/csv", "image/svg+xml".
        label: The button's text (default "⤓ <filename>").

    Returns:
        An `ipywidgets.HTML` (class `ncet-download`) whose value is `link_html(...)`; beyond
        `MAX_EMBED_BYTES` it holds a note instead of the data.

    Example:
        >>> download_link(frame.to_csv(index=False), "nodes.csv", "text/csv")
    """
    widget = W.HTML(link_html(data, filename, mime, label))
    widget.add_class("ncet-download")
    return widget


def svg_bytes(figure, stem: str) -> bytes:
    """A matplotlib figure as a standalone SVG file (deterministic, ids salted by `stem`)."""
    return (SVG_PROLOG + figure_svg(figure, salt=stem)).encode("utf-8")


def png_bytes(figure) -> bytes:
    """A matplotlib figure as PNG bytes (no metadata beyond the image)."""
    found = re.search(r'base64,([A-Za-z0-9+/=]+)"', figure_png(figure))
    assert found, "ncet.render.figure_png no longer returns an inline base64 <img>"
    return base64.b64decode(found.group(1))


def figure_links_html(figure, stem: str) -> str:
    """The HTML of `figure_downloads`: an SVG and a PNG link side by side."""
    return (link_html(svg_bytes(figure, stem), f"{stem}.svg", "image/svg+xml", "\u2913 SVG")
            + link_html(png_bytes(figure), f"{stem}.png", "image/png", "\u2913 PNG"))


def figure_downloads(figure, stem: str) -> W.HBox:
    """Two buttons saving a matplotlib figure as `<stem>.svg` and `<stem>.png`.

    Args:
        figure: A matplotlib Figure (e.g. `ncet.render.exactness_figure(report)`).
        stem: The file name without extension; also salts the SVG's element ids.
    """
    box = W.HBox([
        download_link(svg_bytes(figure, stem), f"{stem}.svg", "image/svg+xml", "\u2913 SVG"),
        download_link(png_bytes(figure), f"{stem}.png", "image/png", "\u2913 PNG")])
    box.add_class("ncet-downloads")
    return box


def frame_csv(df) -> str:
    """A DataFrame as CSV text, without its index (the same text every time)."""
    return df.to_csv(index=False, lineterminator="\n")


def frame_download(df, filename: str, label: str | None = None) -> W.HTML:
    """A button saving a pandas DataFrame as CSV (without its index).

    Args:
        df: The DataFrame.
        filename: The name to save it as, e.g. "nodes.csv".
        label: The button's text (default "⤓ <filename>").
    """
    return download_link(frame_csv(df), filename, "text/csv", label)
