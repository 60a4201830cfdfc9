"""Peak resident memory of one call, for the benchmarks (benchmarks/scale.py, exactness.py).

Peak RSS is per process: run the measured call in a fresh process (`fresh_process_mib`) so
that nothing the parent allocated before hides or inflates it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MMAP_THRESHOLD = 2 ** 20  # bytes: glibc returns freed buffers above this size to the system


def peak_growth_mib(fn: Callable[[], object]) -> float:
    """Run `fn` and return the growth of this process's peak RSS over its RSS just before.

    On Linux the peak (VmHWM) is reset to the current RSS first (`/proc/self/clear_refs`),
    so whatever ran earlier in the process (a conversion, say) does not hide the growth.
    Elsewhere the fallback is `ru_maxrss`, which cannot be reset: there the result is the
    growth of the process's lifetime peak, 0 when `fn` stays under an earlier peak.

    Args:
        fn: The call to measure; its result is discarded.

    Returns:
        MiB of peak RSS growth, never negative.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak (VmHWM) to the current RSS
        before, peak = _status_kib("VmRSS"), lambda: _status_kib("VmHWM")
    except OSError:
        before = _max_rss_kib()
        peak = _max_rss_kib
    fn()
    return max(peak() - before, 0) / 1024


def fresh_process_mib(code: str, fixed_mmap_threshold: bool = True) -> float:
    """Run Python `code` in a fresh interpreter at the repository root and return the float
    it prints last (the child calls `peak_growth_mib` and prints the result).

    Args:
        code: Python source for `python -c`; `benchmarks` is importable from it.
        fixed_mmap_threshold: Give glibc's malloc a fixed mmap threshold
            (MALLOC_MMAP_THRESHOLD_=1 MiB), so freed large buffers go back to the system; by
            default glibc raises the threshold dynamically and keeps freed buffers in its
            heap, which shows as growth that is fragmentation, not live data.

    Returns:
        The last line of the child's stdout, as a float.
    """
    env = dict(os.environ)
    if fixed_mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=_ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def _max_rss_kib() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # macOS reports bytes
