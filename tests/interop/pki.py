"""Test certificates made with the openssl CLI: a CA, a server certificate
for localhost / 127.0.0.1, client certificates with a chosen CN. EC P-256
keys (quick to make); files in the test's tmp_path."""

import subprocess
from pathlib import Path


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


class Pki:
    def __init__(self, directory: Path, name: str = "ramqp test CA"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = self.dir / "ca.pem"
        self.ca_key = self.dir / "ca.key"
        _openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(self.ca_key), "-out", str(self.ca), "-days", "2",
            "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=self.dir,
        )

    def _issue(self, stem: str, cn: str, extensions: str):
        key = self.dir / f"{stem}.key"
        csr = self.dir / f"{stem}.csr"
        cert = self.dir / f"{stem}.pem"
        ext = self.dir / f"{stem}.ext"
        ext.write_text(extensions)
        _openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={cn}",
            cwd=self.dir,
        )
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(self.ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext),
            cwd=self.dir,
        )
        return cert, key

    def server(self, stem: str = "server"):
        return self._issue(
            stem, "localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )

    def client(self, cn: str):
        return self._issue(f"client-{cn}", cn, "extendedKeyUsage=clientAuth\n")

    def fabric_node(self, stem: str, name: str = "ramqp-fabric"):
        """A fabric certificate: the cluster's server name as its DNS name,
        good for listening and for dialling (a node does both)."""
        return self._issue(
            stem, stem,
            f"subjectAltName=DNS:{name}\nextendedKeyUsage=serverAuth,clientAuth\n",
        )
