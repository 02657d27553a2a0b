"""Real network partitions for the nemesis: each node in its own network
namespace on one bridge, and nft rules that cut pairs of them.

    host (clients, ramqp-ctl) 10.77.0.254 on bridge rqnem0
      |-- veth rqnem1 <-> eth0 in netns rqnem-n1, 10.77.0.1
      |-- veth rqnem2 <-> eth0 in netns rqnem-n2, 10.77.0.2
      `-- veth rqnem3 <-> eth0 in netns rqnem-n3, 10.77.0.3

Node-to-node traffic crosses the bridge, so one `bridge` family nft table
(forward hook, matched on the in and out ports) cuts exactly the pairs we
name, both ways. Client traffic starts on the host, so a second `inet`
table (output and input hooks) cuts the clients from one node's AMQP port
while the nodes still talk. A cut drops packets: open connections stall
and resume on heal, as on a real network, rather than being reset.

Owns: the namespaces, the bridge, the nft tables, and their removal (also
of leftovers of an earlier run that was killed). Knows nothing of brokers:
the nemesis starts each node through `wrapper(node)`.
"""

import os
import shutil
import subprocess

PREFIX = "rqnem"
BRIDGE = f"{PREFIX}0"
HOST_IP = "10.77.0.254"
NODE_TABLE = f"{PREFIX}_nodes"
CLIENT_TABLE = f"{PREFIX}_clients"


def unavailable():
    """Why partitions cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, nft)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 nftables)"
    # Root is not always enough (a container without CAP_SYS_ADMIN, no
    # nf_tables): try both once.
    probe = f"{PREFIX}-probe"
    try:
        made = _run("ip", "netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"cannot make a network namespace: {made.stderr.strip()}"
        table = _run("nft", "add", "table", "bridge", f"{PREFIX}_probe", check=False)
        if table.returncode != 0:
            return f"cannot add an nft bridge table: {table.stderr.strip()}"
    finally:
        _run("nft", "delete", "table", "bridge", f"{PREFIX}_probe", check=False)
        _run("ip", "netns", "del", probe, check=False)
    return None


def _run(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20, check=check)


def _nft(script):
    subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=20, check=True)


class Netns:
    """Namespaces for nodes 1..size on one bridge."""

    def __init__(self, size):
        self.size = size
        self.cut_pairs = set()
        self.cut_clients = set()
        self.remove()
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        for node in range(1, size + 1):
            ns, veth = self.namespace(node), self.veth(node)
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", veth, "master", BRIDGE, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.ip(node)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    @staticmethod
    def namespace(node):
        return f"{PREFIX}-n{node}"

    @staticmethod
    def veth(node):
        return f"{PREFIX}{node}"

    @staticmethod
    def ip(node):
        return f"10.77.0.{node}"

    def hosts(self):
        return {node: self.ip(node) for node in range(1, self.size + 1)}

    def wrappers(self):
        return {node: ("ip", "netns", "exec", self.namespace(node)) for node in range(1, self.size + 1)}

    # -- cuts -----------------------------------------------------------

    def cut(self, pairs):
        """Drop every packet between the nodes of each pair, both ways."""
        self.cut_pairs |= {tuple(sorted(p)) for p in pairs}
        self._apply_nodes()

    def cut_clients_from(self, node, amqp_port):
        """Drop the host's AMQP traffic to `node` (its clients stall; the
        fabric and ramqp-ctl, on another port, still pass)."""
        self.cut_clients.add((node, amqp_port))
        self._apply_clients()

    def heal(self):
        self.cut_pairs.clear()
        self.cut_clients.clear()
        _run("nft", "delete", "table", "bridge", NODE_TABLE, check=False)
        _run("nft", "delete", "table", "inet", CLIENT_TABLE, check=False)

    def _apply_nodes(self):
        rules = []
        for a, b in sorted(self.cut_pairs):
            for x, y in ((a, b), (b, a)):
                rules.append(f'    iifname "{self.veth(x)}" oifname "{self.veth(y)}" drop')
        _run("nft", "delete", "table", "bridge", NODE_TABLE, check=False)
        _nft(
            f"table bridge {NODE_TABLE} {{\n"
            f"  chain cut {{\n    type filter hook forward priority 0; policy accept;\n"
            + "\n".join(rules) + "\n  }\n}\n"
        )

    def _apply_clients(self):
        out, inp = [], []
        for node, port in sorted(self.cut_clients):
            out.append(f"    ip daddr {self.ip(node)} tcp dport {port} drop")
            inp.append(f"    ip saddr {self.ip(node)} tcp sport {port} drop")
        _run("nft", "delete", "table", "inet", CLIENT_TABLE, check=False)
        _nft(
            f"table inet {CLIENT_TABLE} {{\n"
            f"  chain out {{\n    type filter hook output priority 0; policy accept;\n" + "\n".join(out) + "\n  }\n"
            f"  chain inp {{\n    type filter hook input priority 0; policy accept;\n" + "\n".join(inp) + "\n  }\n}\n"
        )

    # -- removal --------------------------------------------------------

    def remove(self):
        """Delete the tables, namespaces (their veths go with them) and the
        bridge; also what a killed earlier run left behind."""
        self.heal()
        listed = _run("ip", "netns", "list", check=False).stdout.split()
        for name in listed:
            if name.startswith(f"{PREFIX}-n"):
                _run("ip", "netns", "del", name, check=False)
        _run("ip", "link", "del", BRIDGE, check=False)
