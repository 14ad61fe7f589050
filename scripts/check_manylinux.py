"""Check, with auditwheel's own policies, that a wheel or shared libraries load wherever manylinux_2_28 does.

    python scripts/check_manylinux.py dist/torchtrt_plugins-*.whl
    python scripts/check_manylinux.py build/libmyops_plugins.so build/libmyops_launchers.so

Fails unless `auditwheel show` finds that the libraries' versioned symbols (glibc, libstdc++, libgcc_s) allow
manylinux_2_28 or older, and that the only library they need from outside is the CUDA runtime (libcudart, which
torch's CUDA wheels and the CUDA toolkit bring), except the C++ eager kernel, which needs torch's own libraries too
(found next to the installed torch through its RPATH): libtorch_cpu.so for its stable flavour
(libtorchtrt_plugins_eager.so), libtorch_cpu.so and libc10.so for its native one (libtorchtrt_plugins_eager_native.so),
and nothing else; a wheel's platform tag must be manylinux_2_28 or older yet no older than its libraries allow.
Shared libraries are checked inside a throwaway wheel (auditwheel reads only wheels).
.ci/run runs it on the wheel and on an example package's libraries built with the SDK's manylinux toolchain.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: The newest glibc the libraries may need: torch's and TensorRT's wheels are manylinux_2_28 (RHEL 8).
NEWEST_GLIBC = (2, 28)
#: Needed from outside the wheel and allowed to be: the CUDA runtime comes from the toolkit or a pip package.
EXTERNAL_ALLOWED = re.compile(r"libcudart\.so\.\d+")
#: The libraries allowed torch's own libraries as externals too (the eager kernel's flavours), and which.
TORCH_LINKED = {
    "libtorchtrt_plugins_eager.so": {"libtorch_cpu.so"},
    "libtorchtrt_plugins_eager_native.so": {"libtorch_cpu.so", "libc10.so"},
}
TORCH_LIBRARIES = set().union(*TORCH_LINKED.values())
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_")


def _glibc(tag: str) -> tuple[int, int] | None:
    found = _MANYLINUX.match(tag)
    return (int(found.group(1)), int(found.group(2))) if found else None


def _tag_name(glibc: tuple[int, int]) -> str:
    return f"manylinux_{glibc[0]}_{glibc[1]}"


def _libraries_wheel(libraries: list[Path], folder: Path) -> Path:
    """A minimal wheel holding ``libraries``: what auditwheel can read."""
    machine = subprocess.run(["uname", "-m"], capture_output=True, text=True, check=True).stdout.strip()
    wheel = folder / f"libraries-0-py3-none-linux_{machine}.whl"
    info = "libraries-0.dist-info"
    files = {f"libraries/{library.name}": library for library in libraries}
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, library in files.items():
            archive.write(library, name)
        archive.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: libraries\nVersion: 0\n")
        archive.writestr(
            f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_{machine}\n"
        )
        # auditwheel finds the files through RECORD (hashes are not checked).
        archive.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))
    return wheel


def _needed(data: bytes) -> list[str]:
    """A shared library's DT_NEEDED entries (pyelftools, which auditwheel brings)."""
    import io

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    return [
        tag.needed
        for section in elf.iter_sections()
        if isinstance(section, DynamicSection)
        for tag in section.iter_tags()
        if tag.entry.d_tag == "DT_NEEDED"
    ]


def torch_linked(path: Path) -> tuple[set[str], list[str]]:
    """The torch libraries the libraries in wheel ``path`` may need, and the problems: one needed by a library other
    than the eager kernel's, or not among those its flavour may need."""
    allowed, problems = set(), []
    with zipfile.ZipFile(path) as archive:
        for name in (n for n in archive.namelist() if re.search(r"\.so(\.\d+)*$", n)):
            needs = TORCH_LIBRARIES & set(_needed(archive.read(name)))
            may = TORCH_LINKED.get(Path(name).name, set())
            if needs - may:
                problems.append(f"{name} needs {sorted(needs - may)}: only {sorted(TORCH_LINKED)} may, each its own")
            allowed |= needs & may
    return allowed, problems


def check(path: Path) -> tuple[list[str], tuple[int, int] | None]:
    """What keeps the wheel ``path`` from loading wherever manylinux_2_28 does (empty when nothing), and the glibc
    its libraries need."""
    shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(path)], capture_output=True, text=True)
    print(shown.stdout.strip() or shown.stderr.strip())
    print(
        "(auditwheel's overall tag counts the CUDA runtime, which no manylinux policy lists; like torch's CUDA wheels,"
        " ours leave it outside: the symbol versions decide here)"
    )
    report = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", str(path)], capture_output=True, text=True
    )
    if report.returncode != 0:
        return [f"auditwheel show failed: {report.stderr.strip()}"], None
    analysis = json.loads(report.stdout)
    problems = []
    needed = _glibc(analysis["sym_tag"])
    if needed is None or needed > NEWEST_GLIBC:
        problems.append(
            f"the libraries' versioned symbols constrain the platform tag to {analysis['sym_tag']}, not "
            f"{_tag_name(NEWEST_GLIBC)} or older: {analysis['versioned_symbols']}"
        )
    allowed, problems_linked = torch_linked(path)
    problems += problems_linked
    external = sorted(
        name for name in analysis["external_libs"] if not EXTERNAL_ALLOWED.fullmatch(name) and name not in allowed
    )
    if external:
        also = f" and {', '.join(sorted(allowed))}" if allowed else ""
        problems.append(f"external libraries other than the CUDA runtime{also}: {external}")
    return problems, needed


def check_wheel_tag(wheel: Path, needed: tuple[int, int] | None) -> list[str]:
    platforms = wheel.name.removesuffix(".whl").split("-")[-1].split(".")
    problems = []
    for platform in platforms:
        claimed = _glibc(platform)
        if claimed is None or claimed > NEWEST_GLIBC:
            problems.append(f"platform tag {platform}: not {_tag_name(NEWEST_GLIBC)} or older")
        elif needed is not None and claimed < needed:
            problems.append(f"platform tag {platform} claims more than the libraries allow ({_tag_name(needed)})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="one wheel, or shared libraries")
    args = parser.parse_args(argv)
    wheels = [p for p in args.paths if p.suffix == ".whl"]
    if wheels and len(args.paths) > 1:
        parser.error("give one wheel, or shared libraries")
    with tempfile.TemporaryDirectory() as folder:
        target = wheels[0] if wheels else _libraries_wheel(args.paths, Path(folder))
        problems, needed = check(target)
        if wheels:
            problems += check_wheel_tag(target, needed)
    names = ", ".join(p.name for p in args.paths)
    if problems:
        print(f"check_manylinux: FAILED for {names}:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"check_manylinux: {names} load on glibc {'.'.join(map(str, NEWEST_GLIBC))} and later (manylinux)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
