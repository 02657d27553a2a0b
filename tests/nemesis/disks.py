"""Small real disks for the nemesis: each node's data directory on its own
loop-mounted ext4 image, and a ballast file that fills one of them.

A full disk must be a real file system: tmpfs ignores fsync and has no
ENOSPC on the paths redb takes, and device-mapper (dm-flakey) is missing
from this kernel. The images are sparse files beside the run's own
temporary directory, so they cost only what the nodes write.

Owns: the images, their mounts and loop devices, the ballast, and their
removal. Knows nothing of brokers beyond "a directory per node".
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

IMAGE_BYTES = 512 * 1024 * 1024
# What the ballast leaves free: nothing a write of the log store can use.
BALLAST_CHUNK = 4 * 1024 * 1024


def unavailable():
    """Why loop-mounted disks cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (mount)"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None and not Path("/sbin", tool).exists() and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed (apt-get install e2fsprogs mount)"
    return None


class Disks:
    """One mounted ext4 per node; `dirs()` gives each node's data dir."""

    def __init__(self, nodes):
        self.root = Path(tempfile.mkdtemp(prefix="ramqp-nemesis-disks-"))
        self.mounts = {}
        try:
            for node in nodes:
                image = self.root / f"node{node}.img"
                mount = self.root / f"node{node}"
                mount.mkdir()
                with open(image, "wb") as f:
                    f.truncate(IMAGE_BYTES)
                subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True, timeout=60)
                subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True, capture_output=True,
                               timeout=60)
                self.mounts[node] = mount
        except BaseException:
            self.remove()
            raise

    def dirs(self):
        return {node: mount / "data" for node, mount in self.mounts.items()}

    def ballast(self, node):
        return self.mounts[node] / "ballast"

    def fill(self, node):
        """Write ballast until the file system says ENOSPC; returns the
        bytes written."""
        written = 0
        chunk = b"\0" * BALLAST_CHUNK
        fd = os.open(self.ballast(node), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                try:
                    n = os.write(fd, chunk)
                except OSError:
                    break
                written += n
                if n < len(chunk):
                    chunk = chunk[: max(4096, n)]
            try:
                os.fsync(fd)
            except OSError:
                pass
        finally:
            os.close(fd)
        return written

    def free_space(self, node):
        self.ballast(node).unlink(missing_ok=True)

    def free_bytes(self, node):
        return shutil.disk_usage(self.mounts[node]).free

    def remove(self):
        for mount in self.mounts.values():
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=60)
        self.mounts.clear()
        shutil.rmtree(self.root, ignore_errors=True)
