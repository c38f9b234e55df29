"""kiln.Array's HTML repr for notebooks: shape, dtype, chunks, bytes, as Dask's."""

from __future__ import annotations

import html
import math


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


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
    body = "".join(
        f"<tr><th>{html.escape(a)}</th><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in rows
    )
    return (
        "<table><thead><tr><td></td><th>Array</th><th>Block</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
