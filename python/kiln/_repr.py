"""kiln.Array's HTML repr for notebooks: shape, dtype, chunks and bytes with a chunk diagram, as
Dask's, and what Dask cannot show: the fused kernels and block tasks computing it would run."""

from __future__ import annotations

import html
import math
import re


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


# More chunk boundaries than this along a dim are drawn as a shaded box, not as lines.
_MAX_LINES = 40


def _lines(sizes, length, horizontal, other):
    """The chunk boundaries along one dim of the diagram (SVG lines), or none past _MAX_LINES."""
    if len(sizes) > _MAX_LINES:
        return []
    total, at, out = sum(sizes), 0, []
    for s in sizes[:-1]:
        at += s
        p = round(length * at / total, 1)
        out.append(
            f'<line x1="0" y1="{p}" x2="{other}" y2="{p}"/>'
            if horizontal
            else f'<line x1="{p}" y1="0" x2="{p}" y2="{other}"/>'
        )
    return out


def chunk_diagram(chunks, size: int = 120) -> str:
    """An SVG of the last two dims' chunk grid (one dim: a strip), sized by their ratio."""
    if not chunks:
        return ""
    rows, cols = (chunks[-2], chunks[-1]) if len(chunks) >= 2 else ((1,), chunks[-1])
    n_rows, n_cols = max(sum(rows), 1), max(sum(cols), 1)
    width = max(size * min(1.0, n_cols / n_rows), 12)
    height = max(size * min(1.0, n_rows / n_cols), 12) if len(chunks) >= 2 else 24
    dense = len(rows) > _MAX_LINES or len(cols) > _MAX_LINES
    fill = "#8B4903" if dense else "#ECB172"
    body = [f'<rect x="0" y="0" width="{width:.1f}" height="{height:.1f}" fill="{fill}" '
            f'fill-opacity="0.6" stroke="black" stroke-width="1.5"/>']
    body += _lines(list(rows), height, True, round(width, 1))
    body += _lines(list(cols), width, False, round(height, 1))
    caption = f"last two dims of {len(chunks)}" if len(chunks) > 2 else ""
    return (
        f'<svg width="{width + 4:.0f}" height="{height + 4:.0f}" style="stroke:black;'
        f'stroke-width:0.6"><g transform="translate(2,2)">{"".join(body)}</g></svg>'
        + (f"<div><small>{html.escape(caption)}</small></div>" if caption else "")
    )


def _plan_summary(x):
    """(kernels, block tasks) of computing x, from the plan kiln.explain makes (planning and
    compiling without computing; the compute that follows reuses the plan), or an error text."""
    from . import _core

    try:
        text = _core.explain(x)
    except Exception as e:  # a repr must not raise: say why there is no plan
        return None, f"{type(e).__name__}: {e}"
    m = re.search(r"(\d+) kernels, (\d+) block tasks", text)
    return (int(m.group(1)), int(m.group(2))) if m else None, ""


def array_html(x) -> str:
    chunk_bytes = x.itemsize
    for c in x.chunksize:
        chunk_bytes *= c
    rows = [
        ("Bytes", _bytes(x.nbytes), _bytes(chunk_bytes)),
        ("Shape", str(x.shape), str(x.chunksize)),
        ("Blocks", str(math.prod(x.numblocks)), f"{x.numblocks}"),
        ("Type", str(x.dtype), "kiln lazy expression"),
    ]
    plan, why = _plan_summary(x)
    if plan:
        rows.append(("Plan", f"{plan[0]} fused kernel{'s' if plan[0] != 1 else ''}",
                     f"{plan[1]} block tasks"))
    else:
        rows.append(("Plan", "not planned", why[:200]))
    body = "".join(
        f"<tr><th>{html.escape(a)}</th><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in rows
    )
    table = (
        "<table><thead><tr><td></td><th>Array</th><th>Block</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    return (
        f'<table><tr><td style="vertical-align:top">{table}</td>'
        f'<td style="vertical-align:middle;padding-left:1em">{chunk_diagram(x.chunks)}</td>'
        "</tr></table>"
    )
