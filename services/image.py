"""Building shardlog's image where no registry and no package index over HTTPS can be reached
(an air-gapped site, or this machine):

- the base image: ``debian:bookworm-slim`` when the engine has it or can pull it, otherwise one
  made here with ``debootstrap --variant=minbase bookworm`` from the host's Debian mirror and
  ``docker import`` (tagged ``shardlog/debian-base:bookworm``);
- the wheelhouse: every pinned Python dependency as a wheel (plus setuptools and wheel for the
  build backend) and the native extension's wheel (native/), built on the host, so that the
  image installs with ``pip --no-index``;
- the image: ``docker build`` of docker/Dockerfile with both.

    python -m services.image wheelhouse | base | build   [--home var/docker]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from services.docker_engine import DockerEngine, engine_running, run
from services.process import ServiceError

REPO = Path(__file__).resolve().parent.parent
IMAGE = "shardlog/shardlog:dev"
UPSTREAM_BASE = "debian:bookworm-slim"
LOCAL_BASE = "shardlog/debian-base:bookworm"
WHEELHOUSE = REPO / "var" / "wheelhouse"
MIRROR = os.environ.get("SHARDLOG_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get(
    "SHARDLOG_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security"
)
# What the image installs from the wheelhouse besides the project's dependencies.
BUILD_BACKEND = ("setuptools>=68", "wheel")


def has_image(engine: DockerEngine, name: str) -> bool:
    return engine.docker("image", "inspect", name, check=False).returncode == 0


def base_image(engine: DockerEngine) -> str:
    """The name of a bookworm base image the engine has, made locally when it cannot pull."""
    for name in (UPSTREAM_BASE, LOCAL_BASE):
        if has_image(engine, name):
            return name
    pulled = engine.docker("pull", UPSTREAM_BASE, check=False, timeout=600)
    if pulled.returncode == 0:
        return UPSTREAM_BASE
    print(f"cannot pull {UPSTREAM_BASE} ({pulled.stderr.strip()[:200]}); making {LOCAL_BASE}")
    make_local_base(engine)
    return LOCAL_BASE


def make_local_base(engine: DockerEngine) -> None:
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(debootstrap).exists():
        raise ServiceError("debootstrap is not installed (make install-docker installs it)")
    with tempfile.TemporaryDirectory(prefix="shardlog-rootfs-") as scratch:
        root = Path(scratch) / "rootfs"
        run(
            [debootstrap, "--variant=minbase", "bookworm", root, MIRROR],
            {**os.environ, "PATH": f"/usr/sbin:/sbin:{os.environ.get('PATH', '/usr/bin:/bin')}"},
            timeout=1800,
        )
        (root / "etc/apt/sources.list").write_text(
            f"deb {MIRROR} bookworm main\n"
            f"deb {MIRROR} bookworm-updates main\n"
            f"deb {SECURITY_MIRROR} bookworm-security main\n"
        )
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        (root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "-", LOCAL_BASE],
            stdin=tar.stdout,
            env=engine.env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise ServiceError(f"docker import of the base image failed: {imported.stderr}")


def _pip_wheel(python: str, target: Path, *arguments: str | Path, path: str = "") -> None:
    """``pip wheel`` into ``target``; ``path``: directories put before PATH."""
    env = dict(os.environ)
    if path:
        env["PATH"] = f"{path}:{env['PATH']}"
    run([python, "-m", "pip", "wheel", "--quiet", "--wheel-dir", target, *arguments], env)


def build_wheelhouse(target: Path = WHEELHOUSE, python: str = sys.executable) -> Path:
    """Wheels of every pinned runtime dependency (no dev extras), of the build backend and of
    the native extension. Needs the package index once; the result is what an air-gapped site
    carries in."""
    target.mkdir(parents=True, exist_ok=True)
    _pip_wheel(python, target, "--constraint", REPO / "constraints.txt", REPO, *BUILD_BACKEND)
    # The project's own wheel is not used: the image installs the checkout (editable).
    for wheel in target.glob("shardlog-*.whl"):
        wheel.unlink()
    build_native_wheel(target, python)
    return target


def build_native_wheel(target: Path, python: str = sys.executable) -> Path:
    """The native extension's wheel (native/, built with cargo and with maturin from the
    venv), for the ``native`` extra: it is on no package index."""
    for stale in target.glob("shardlog_native-*.whl"):
        stale.unlink()
    cargo_bin = Path.home() / ".cargo" / "bin"  # rustup's; Debian's cargo is on PATH already
    tools = f"{Path(python).parent}:{cargo_bin}"
    _pip_wheel(python, target, "--no-deps", "--no-build-isolation", REPO / "native", path=tools)
    return next(target.glob("shardlog_native-*.whl"))


def build_image(engine: DockerEngine, wheelhouse: Path = WHEELHOUSE, tag: str = IMAGE) -> str:
    if not any(wheelhouse.glob("*.whl")):
        build_wheelhouse(wheelhouse)
    base = base_image(engine)
    engine.docker(
        "build",
        "--file",
        REPO / "docker" / "Dockerfile",
        "--tag",
        tag,
        "--build-arg",
        f"BASE_IMAGE={base}",
        "--build-arg",
        f"WHEELHOUSE={wheelhouse.relative_to(REPO)}",
        REPO,
        timeout=3600,
    )
    return tag


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m services.image")
    parser.add_argument("what", choices=["wheelhouse", "base", "build"])
    parser.add_argument("--home", type=Path, default=REPO / "var" / "docker")
    args = parser.parse_args()
    if args.what == "wheelhouse":
        print(f"wheelhouse: {build_wheelhouse()}")
        return 0
    # The engine keeps running after a build started here: `make down-docker` stops it.
    engine = DockerEngine(args.home)
    engine.start()
    if args.what == "base":
        print(f"base image: {base_image(engine)}")
    else:
        print(f"image: {build_image(engine)} (engine {engine.host()})")
    return 0


__all__ = ["build_image", "build_wheelhouse", "engine_running"]

if __name__ == "__main__":
    sys.exit(main())
