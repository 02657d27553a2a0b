"""What the process and clock faults need from this machine, and why a
fault cannot run here (root for ptrace, strace, libfaketime).

Owns: those checks and the libfaketime path. Knows nothing of brokers.
"""

import os
import shutil
from pathlib import Path

# libfaketime, from Debian's faketime package. Only its whole-process modes
# are used: with FAKETIME_DONT_FAKE_MONOTONIC (a wall-clock-only step) its
# clock_nanosleep returns EINVAL, and a timestamp file changed under a
# running process steps the monotonic clock backwards, which no real
# machine does (both tried here).
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")


def faketime_unavailable():
    if not FAKETIME_LIB.exists():
        return f"{FAKETIME_LIB} is missing (apt-get install faketime)"
    return None


def root_and(tool):
    if os.geteuid() != 0:
        return "needs root (ptrace)"
    if shutil.which(tool) is None:
        return f"{tool} is not installed"
    return None
