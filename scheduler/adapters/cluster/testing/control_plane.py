"""A local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager, built
from the Go module proxy by deploy/realcluster/build.sh, run as processes on 127.0.0.1.

    python -m scheduler.adapters.cluster.testing.control_plane up [--dir var/realcluster]
        [--nodes 4 --gpus 8]        prints KUBECONFIG=<admin kubeconfig> and SERVER_VERSION=...
        With --nodes it also applies deploy/rbac.yaml and writes portal.kubeconfig (the
        portal's ServiceAccount) into --dir, for the portal itself.
    python -m scheduler.adapters.cluster.testing.control_plane down [--dir var/realcluster]

What the portal meets on a real cluster is the server's own here: RBAC authorization,
admission (NamespaceLifecycle, ServiceAccount, ResourceQuota, PodSecurity and the other
defaults), validation, the garbage collector, ResourceQuota usage, namespace deletion, pod GC,
NoExecute taint eviction, and etcd's compaction (410 Gone). What is not here: a kubelet (pods
bound to a node are driven by fake_kubelet.py, which `up --nodes N` starts for its nodes), a
default scheduler, and node heartbeats (the node lifecycle controller runs, but waits a day
before it judges a silent node; a test makes a node NotReady by its condition, and the
controller then taints it as it would any NotReady node).

etcd keeps its data on tmpfs (/dev/shm) with fsync off: the cluster lives as long as its
processes. `up` is idempotent while the processes it recorded still run; `down` stops them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

REPO = Path(__file__).resolve().parents[4]
BUILD_SCRIPT = REPO / "deploy" / "realcluster" / "build.sh"
KUBE_VERSION = "v1.37.2"
# The controllers the portal's behaviour depends on. node-lifecycle-controller is on but never
# judges a node by its heartbeats (see _controller_manager_args): it keeps the condition taints
# (not-ready, unschedulable) as on a real cluster, and the taint eviction controller needs the
# pod index it registers (without it, every eviction fails with "Index with name spec.nodeName
# does not exist").
CONTROLLERS = (
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "garbage-collector-controller",
    "resourcequota-controller",
    "namespace-controller",
    "pod-garbage-collector-controller",
    "taint-eviction-controller",
    "root-ca-certificate-publisher-controller",
)
SERVICE_CIDR = "10.96.0.0/16"
READY_TIMEOUT = 90.0


@dataclass(frozen=True)
class Ports:
    etcd_client: int = 23790
    etcd_peer: int = 23800
    apiserver: int = 26443

    @classmethod
    def from_env(cls) -> Ports:
        return cls(
            etcd_client=int(os.environ.get("REALCLUSTER_ETCD_PORT", cls.etcd_client)),
            etcd_peer=int(os.environ.get("REALCLUSTER_ETCD_PEER_PORT", cls.etcd_peer)),
            apiserver=int(os.environ.get("REALCLUSTER_APISERVER_PORT", cls.apiserver)),
        )


class ControlPlane:
    """The files and processes of one local control plane, all under `workdir`."""

    def __init__(self, workdir: Path, ports: Ports | None = None) -> None:
        self.workdir = workdir.resolve()
        self.ports = ports or Ports.from_env()
        self.pki = self.workdir / "pki"
        # tmpfs, private to this plane's port; removed by down()
        self.etcd_data = Path("/dev/shm") / f"gpuportal-etcd-{self.ports.etcd_client}"  # noqa: S108

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.etcd_client}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def info_file(self) -> Path:
        return self.workdir / "plane.json"

    @property
    def pid_file(self) -> Path:
        return self.workdir / "pids.json"

    # -- processes -----------------------------------------------------------------------

    def running(self) -> dict[str, int]:
        """name -> pid of the recorded processes that are still alive."""
        try:
            recorded = json.loads(self.pid_file.read_text())
        except (OSError, ValueError):
            return {}
        return {name: pid for name, pid in recorded.items() if _alive(pid)}

    def up(self, bin_dir: Path) -> None:
        """Starts what is not running, then waits until the API server is ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        alive = self.running()
        if {"etcd", "kube-apiserver", "kube-controller-manager"} <= alive.keys():
            self.wait_ready()
            return
        self.down()  # a half-running plane from a crash: start clean
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_pki(self.pki)
        self._write_kubeconfig(self.admin_kubeconfig, "admin")
        self._write_kubeconfig(self.workdir / "controller-manager.kubeconfig", "controller-manager")
        pids: dict[str, int] = {}
        pids["etcd"] = self._spawn("etcd", bin_dir / "etcd", self._etcd_args())
        self._record(pids)
        self._wait_for(lambda: _http_ok(f"{self.etcd_url}/health"), "etcd")
        pids["kube-apiserver"] = self._spawn(
            "kube-apiserver", bin_dir / "kube-apiserver", self._apiserver_args()
        )
        self._record(pids)
        self.wait_ready()
        pids["kube-controller-manager"] = self._spawn(
            "kube-controller-manager",
            bin_dir / "kube-controller-manager",
            self._controller_manager_args(),
        )
        self._record(pids)
        # What tests need to reach the plane's parts besides the API server (etcd, for
        # compaction; the binaries, to restart the API server).
        self.info_file.write_text(
            json.dumps(
                {"server": self.server, "etcd": self.etcd_url, "bin_dir": str(bin_dir),
                 "ports": vars(self.ports)},
                indent=1,
            )
        )  # fmt: skip

    @classmethod
    def of(cls, workdir: Path) -> ControlPlane:
        """The running plane whose files are in `workdir` (as `up` recorded it)."""
        info = json.loads((workdir / "plane.json").read_text())
        return cls(workdir, Ports(**info["ports"]))

    def restart_apiserver(self) -> None:
        """Stops kube-apiserver and starts it again on the same etcd: its watch cache starts
        over at etcd's current revision, so a watch from an older resourceVersion is 410,
        as after any API server upgrade or crash."""
        bin_dir = Path(json.loads(self.info_file.read_text())["bin_dir"])
        pids = self.running()
        pid = pids.pop("kube-apiserver")
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal(pid, signal.SIGKILL)
        pids["kube-apiserver"] = self._spawn(
            "kube-apiserver", bin_dir / "kube-apiserver", self._apiserver_args()
        )
        self._record(pids)
        self.wait_ready()

    def add_process(self, name: str, command: list[str]) -> None:
        """Another process that lives and dies with the plane (the fake kubelet of `up`)."""
        pids = self.running()
        pids[name] = self._spawn(name, Path(command[0]), command[1:], cwd=REPO)
        self._record(pids)

    def down(self) -> None:
        """Stops every recorded process (TERM, then KILL after 10 s) and drops etcd's data."""
        pids = self.running()
        for pid in pids.values():
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids.values():
            _signal(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        shutil.rmtree(self.etcd_data, ignore_errors=True)

    def wait_ready(self) -> None:
        context = self.ssl_context()
        self._wait_for(lambda: _http_ok(f"{self.server}/readyz", context), "kube-apiserver")

    def _wait_for(self, ready: Callable[[], bool], name: str) -> None:
        """Until `ready()`, giving up with the end of the process's log when it exits or
        READY_TIMEOUT passes."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if ready():
                return
            if name not in self.running():
                break
            time.sleep(0.25)
        log = self.workdir / f"{name}.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
        raise SystemExit(f"control plane: {name} is not ready; its log ends:\n{tail}")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(self.pki / "admin.crt", self.pki / "admin.key")
        return context

    def server_version(self) -> str:
        url = f"{self.server}/version"
        with urllib.request.urlopen(url, context=self.ssl_context()) as answer:  # noqa: S310
            return str(json.load(answer)["gitVersion"])

    def _spawn(self, name: str, program: Path, args: list[str], cwd: Path | None = None) -> int:
        log = (self.workdir / f"{name}.log").open("ab")
        process = subprocess.Popen(  # noqa: S603 - our own binaries and arguments
            [str(program), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives `up`; `down` stops it
            cwd=cwd or self.workdir,
        )
        return process.pid

    def _record(self, pids: dict[str, int]) -> None:
        self.pid_file.write_text(json.dumps(pids, indent=1))

    # -- arguments -------------------------------------------------------------------------

    def _etcd_args(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        return [
            "--name=local",
            f"--data-dir={self.etcd_data}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync",  # tmpfs, a throwaway cluster: durability buys nothing
            "--log-level=warn",
        ]

    def _apiserver_args(self) -> list[str]:
        pki = self.pki
        return [
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The `kubernetes` Service's endpoints would be 127.0.0.1, which the reconciler
            # refuses; nothing in the tests reaches the API server through that Service.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.ports.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            # On top of the default set (which has ResourceQuota, ServiceAccount and
            # PodSecurity already): named so a change of defaults cannot drop them.
            "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,ResourceQuota,PodSecurity",
            # Privileged pods pass this door so that Pod Security admission is what refuses them.
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ]

    def _controller_manager_args(self) -> list[str]:
        kubeconfig = self.workdir / "controller-manager.kubeconfig"
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            # Quota usage and garbage collection within a test's patience.
            "--resource-quota-sync-period=5s",
            # Nothing heartbeats the fake nodes: a node is NotReady only when a test says so.
            "--node-monitor-grace-period=24h",
            "--node-startup-grace-period=24h",
            "--v=1",
        ]

    def _write_kubeconfig(self, path: Path, user: str) -> None:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "local",
                            "cluster": {
                                "server": self.server,
                                "certificate-authority": str(self.pki / "ca.crt"),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": user,
                            "user": {
                                "client-certificate": str(self.pki / f"{user}.crt"),
                                "client-key": str(self.pki / f"{user}.key"),
                            },
                        }
                    ],
                    "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
                    "current-context": "local",
                }
            )
        )
        path.chmod(0o600)


def apply_manifests(api_client: Any, documents: list[dict[str, Any]]) -> None:
    """Creates each object, leaving one that exists as it is (`kubectl create`, idempotent)."""
    from kubernetes import utils

    for document in documents:
        try:
            utils.create_from_dict(api_client, document)
        except utils.FailToCreateError as error:
            if any(getattr(exc, "status", None) != 409 for exc in error.api_exceptions):
                raise


def service_account_token(api_client: Any, namespace: str, name: str, hours: int = 24) -> str:
    """A TokenRequest token of that ServiceAccount (what a pod running as it would carry)."""
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=hours * 3600)
    )
    answer = client.CoreV1Api(api_client).create_namespaced_service_account_token(
        name, namespace, request
    )
    if answer.status is None:
        raise RuntimeError(f"no token for ServiceAccount {namespace}/{name}")
    return str(answer.status.token)


def portal_kubeconfig(plane: ControlPlane, api_client: Any) -> Path:
    """deploy/rbac.yaml applied, and a kubeconfig of the portal's ServiceAccount beside the
    admin's: what `./dev run` uses against this plane (with CLUSTER_BACKEND=kubernetes)."""
    documents = [
        doc for doc in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text()) if doc
    ]
    apply_manifests(api_client, documents)
    deadline = time.monotonic() + 30
    while True:  # the token controller makes the ServiceAccount's first token a moment later
        try:
            token = service_account_token(api_client, "gpu-portal", "gpu-portal", hours=24 * 7)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    path = plane.workdir / "portal.kubeconfig"
    token_kubeconfig(
        path, server=plane.server, ca_file=plane.pki / "ca.crt", token=token, user="gpu-portal"
    )
    return path


def etcd_compact(etcd_url: str) -> int:
    """Compacts etcd's history up to its current revision (etcd's JSON gateway: no etcdctl
    needed); returns that revision. Any list continue token or watch from before it is 410."""
    revision = int(_etcd_call(etcd_url, "/v3/kv/range", {"key": "AA=="})["header"]["revision"])
    _etcd_call(etcd_url, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def _etcd_call(etcd_url: str, path: str, body: dict[str, object]) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - the local plane's etcd, http on loopback
        etcd_url + path, data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        return dict(json.load(answer))


def token_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str, user: str) -> None:
    """A kubeconfig that authenticates with a bearer token (a ServiceAccount's)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": server, "certificate-authority": str(ca_file)},
                    }
                ],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
                "current-context": "local",
            }
        )
    )
    path.chmod(0o600)


# -- certificates ----------------------------------------------------------------------------


def write_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate, client certificates for the admin
    (system:masters) and the controller manager, and the service-account signing key pair.
    Kept across restarts of the plane: kubeconfigs handed out stay valid."""
    if (pki / "sa.pub").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuportal-local-ca")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    _write_key(pki / "ca.key", ca_key)
    (pki / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    service_ip = next(ipaddress.IPv4Network(SERVICE_CIDR).hosts())
    _issue(
        pki, "apiserver", ca_cert, ca_key, common_name="kube-apiserver", server=True,
        names=[
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(service_ip),
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.DNSName("kubernetes.default.svc.cluster.local"),
        ],
    )  # fmt: skip
    _issue(pki, "admin", ca_cert, ca_key, common_name="admin", organization="system:masters")
    _issue(
        pki, "controller-manager", ca_cert, ca_key,
        common_name="system:kube-controller-manager",
    )  # fmt: skip
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki / "sa.key", sa_key)
    (pki / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=365))
    )


def _issue(
    pki: Path,
    name: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    common_name: str,
    organization: str | None = None,
    server: bool = False,
    names: list[x509.GeneralName] | None = None,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    usage = x509.oid.ExtendedKeyUsageOID
    builder = _builder(x509.Name(attributes), ca_cert.subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([usage.SERVER_AUTH if server else usage.CLIENT_AUTH]),
        critical=False,
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_key(pki / f"{name}.key", key)
    (pki / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


# -- small helpers ---------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as answer:  # noqa: S310
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def build() -> Path:
    """deploy/realcluster/build.sh: the cached binaries' directory (building them if needed)."""
    answer = subprocess.run(  # noqa: S603
        [shutil.which("bash") or "/bin/bash", str(BUILD_SCRIPT)],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(answer.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.adapters.cluster.testing.control_plane", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--dir", type=Path, default=REPO / "var" / "realcluster")
    parser.add_argument("--bin-dir", type=Path, help="the binaries (default: build.sh's cache)")
    parser.add_argument("--nodes", type=int, default=0, help="fake GPU nodes to register")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per fake node")
    args = parser.parse_args(argv)
    plane = ControlPlane(args.dir)
    if args.command == "down":
        plane.down()
        return 0
    if args.command == "status":
        running = plane.running()
        for name, pid in sorted(running.items()):
            print(f"{name} {pid}")
        return 0 if running else 1
    plane.up(args.bin_dir or build())
    if args.nodes:
        from scheduler.adapters.cluster.testing.fake_kubelet import start_for_plane

        start_for_plane(plane, nodes=args.nodes, gpus=args.gpus)
        from kubernetes import config

        portal_kubeconfig(plane, config.new_client_from_config(str(plane.admin_kubeconfig)))
    print(f"KUBECONFIG={plane.admin_kubeconfig}")
    print(f"SERVER_VERSION={plane.server_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
