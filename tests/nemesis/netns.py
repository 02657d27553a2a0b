"""Real network partitions for the nemesis: each node in its own network
namespace on one bridge, and nft rules that cut pairs of them.

    host (clients, ramqp-ctl) 10.77.T.254 on bridge rqT-br
      |-- veth rqT-v1 <-> eth0 in netns rqT-n1, 10.77.T.1
      |-- veth rqT-v2 <-> eth0 in netns rqT-n2, 10.77.T.2
      `-- veth rqT-v3 <-> eth0 in netns rqT-n3, 10.77.T.3

T is a tag of the run (1-250, from its pid; the next free one if that is
taken), so two runs on one machine do not touch each other's nodes.

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


def unavailable():
    """Why partitions cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, nft)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 nftables)"
    # Root is not always enough (a container without CAP_SYS_ADMIN, no
    # nf_tables): try both once.
    probe = f"{PREFIX}-probe-{os.getpid()}"
    try:
        made = _run("ip", "netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"cannot make a network namespace: {made.stderr.strip()}"
        table = _run("nft", "add", "table", "bridge", f"{PREFIX}_probe_{os.getpid()}", check=False)
        if table.returncode != 0:
            return f"cannot add an nft bridge table: {table.stderr.strip()}"
    finally:
        _run("nft", "delete", "table", "bridge", f"{PREFIX}_probe_{os.getpid()}", check=False)
        _run("ip", "netns", "del", probe, check=False)
    return None


def _run(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20, check=check)


def _nft(script):
    subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=20, check=True)


def _taken(tag):
    return _run("ip", "link", "show", f"rq{tag}-br", check=False).returncode == 0


class Netns:
    """Namespaces for nodes 1..size on one bridge."""

    def __init__(self, size):
        self.size = size
        self.cut_pairs = set()
        self.cut_clients = set()
        start = os.getpid() % 250
        self.tag = next((1 + (start + i) % 250 for i in range(250) if not _taken(1 + (start + i) % 250)), None)
        if self.tag is None:
            raise RuntimeError("no free nemesis network tag (250 bridges rq*-br exist)")
        self.bridge = f"rq{self.tag}-br"
        self.host_ip = f"10.77.{self.tag}.254"
        self.node_table = f"{PREFIX}_{self.tag}_nodes"
        self.client_table = f"{PREFIX}_{self.tag}_clients"
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            self._add_nodes()
        except BaseException:
            self.remove()
            raise

    def _add_nodes(self):
        size = self.size
        for node in range(1, size + 1):
            ns, veth = self.namespace(node), self.veth(node)
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "link", "set", veth, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.ip(node)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    def namespace(self, node):
        return f"rq{self.tag}-n{node}"

    def veth(self, node):
        return f"rq{self.tag}-v{node}"

    def ip(self, node):
        return f"10.77.{self.tag}.{node}"

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
        _run("nft", "delete", "table", "bridge", self.node_table, check=False)
        _run("nft", "delete", "table", "inet", self.client_table, check=False)

    def _apply_nodes(self):
        rules = []
        for a, b in sorted(self.cut_pairs):
            for x, y in ((a, b), (b, a)):
                rules.append(f'    iifname "{self.veth(x)}" oifname "{self.veth(y)}" drop')
        _run("nft", "delete", "table", "bridge", self.node_table, check=False)
        _nft(
            f"table bridge {self.node_table} {{\n"
            f"  chain cut {{\n    type filter hook forward priority 0; policy accept;\n"
            + "\n".join(rules) + "\n  }\n}\n"
        )

    def _apply_clients(self):
        out, inp = [], []
        for node, port in sorted(self.cut_clients):
            out.append(f"    ip daddr {self.ip(node)} tcp dport {port} drop")
            inp.append(f"    ip saddr {self.ip(node)} tcp sport {port} drop")
        _run("nft", "delete", "table", "inet", self.client_table, check=False)
        _nft(
            f"table inet {self.client_table} {{\n"
            f"  chain out {{\n    type filter hook output priority 0; policy accept;\n" + "\n".join(out) + "\n  }\n"
            f"  chain inp {{\n    type filter hook input priority 0; policy accept;\n" + "\n".join(inp) + "\n  }\n}\n"
        )

    # -- removal --------------------------------------------------------

    def remove(self):
        """Delete the tables, namespaces (their veths go with them) and the
        bridge of this run."""
        self.heal()
        for node in range(1, self.size + 1):
            _run("ip", "netns", "del", self.namespace(node), check=False)
        _run("ip", "link", "del", self.bridge, check=False)
