"""kiln.compute(..., progress=True) where stderr is not a terminal (Kiln's own bar, drawn by the
C++ runtime, needs one): a Python thread reads the compute's task counters while the compute
runs without the GIL, and draws a bar in a notebook cell (IPython's display) or text lines on
sys.stderr. Like the terminal bar, it appears only for computes longer than a second."""

from __future__ import annotations

import sys
import threading
import time

from . import _kiln

FIRST_DRAW_S = 1.0  # nothing for short computes
EVERY_S = 0.25


def _notebook_display():
    """An IPython display handle in a notebook kernel, else None."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
        if shell is None or not hasattr(shell, "kernel"):
            return None
        from IPython.display import HTML, display

        return display, HTML
    except Exception:  # no usable IPython: text lines instead
        return None


class _Bar:
    def __init__(self):
        self.t0 = time.perf_counter()
        self.notebook = _notebook_display()
        self.handle = None
        self.drawn = False

    def draw(self, done, total, final=False):
        elapsed = time.perf_counter() - self.t0
        rate = done / elapsed if elapsed > 0 else 0.0
        tail = f"took {elapsed:.1f} s" if final else (
            f"ETA {(total - done) / rate:.1f} s" if rate > 0 and total >= done else "")
        text = f"{done}/{total} tasks  {rate:.0f}/s  {tail}"
        if self.notebook:
            display, html = self.notebook
            page = html(f'<progress value="{done}" max="{max(total, 1)}" style="width:20em">'
                        f"</progress> <code>{text}</code>")
            if self.handle is None:
                self.handle = display(page, display_id=True)
            else:
                self.handle.update(page)
        else:
            width = 30
            filled = width * done // total if total > 0 else width
            sys.stderr.write(f"[{'#' * filled}{'.' * (width - filled)}] {text}\n")
            sys.stderr.flush()
        self.drawn = True


def watched(run):
    """run(progress=False, counters=...) with a bar drawn from this module while it runs."""
    counters = _kiln.TaskCounters()
    stop = threading.Event()
    bar = _Bar()

    def watch():
        if stop.wait(FIRST_DRAW_S):
            return
        while not stop.is_set():
            total = counters.total
            if total >= 0:
                bar.draw(counters.done, total)
            stop.wait(EVERY_S)

    watcher = threading.Thread(target=watch, name="kiln-progress", daemon=True)
    watcher.start()
    try:
        return run(progress=False, counters=counters)
    finally:
        stop.set()
        watcher.join()
        if bar.drawn:
            bar.draw(counters.done, counters.total, final=True)
