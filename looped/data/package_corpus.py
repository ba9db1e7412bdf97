"""A corpus large enough for one pass: the Python sources of one pinned, installed package.

    docs = package_documents("torch-2.13.0")    # (path, source) of every file the manifest lists
    write_manifest(Path(torch.__file__).parent, "torch", Path("torch-2.13.0.tsv"))   # once

The standard library (~5M BPE-512 tokens) is too small for the map's longer runs, and a run that
sees its data twice measures repetition, not the schedule. The project's own environment holds
tens of MB of Python: torch alone, at the version CI pins, is ~46 MB of `.py`. A committed
manifest (relative path and SHA-256 of every file) fixes the corpus: a machine with another
torch build or version is refused in one line before anything is tokenized, so a study resumed
elsewhere trains on the same tokens. Splits and the BPE then follow `data.splits` as for the
standard library (vendored copies, e.g. `torch/_vendor/`, stay in their family's split).
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib import metadata
from pathlib import Path

from looped.errors import UserError

MANIFESTS = Path(__file__).parent / "manifests"
# files that differ between builds of the same version (the CUDA and CPU wheels): not corpus
BUILD_SPECIFIC = {"version.py"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(root: Path, package: str, out: Path) -> int:
    """List every `.py` under `root` (the package directory) as `package/path<TAB>sha256`."""
    lines = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if "__pycache__" in rel or rel in BUILD_SPECIFIC:
            continue
        lines.append(f"{package}/{rel}\t{sha256(f.read_bytes())}")
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


def installed_root(package: str) -> Path | None:
    """The installed package's directory, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def package_documents(
    name: str, root: Path | None = None, manifest: Path | None = None
) -> list[tuple[str, str]]:
    """(path, source) of every file `name`'s manifest lists ("torch-2.13.0": package, version),
    each checked against its hash; `root` and `manifest` override where they are looked for."""
    package, _, version = name.rpartition("-")
    manifest = manifest or MANIFESTS / f"{name}.tsv"
    if not manifest.is_file():
        raise UserError(f"corpus {name}: no manifest {manifest}; name one of {known()}")
    root = root or installed_root(package)
    fix = f"install {package}=={version} (pip install {package}=={version}) or use --corpus stdlib"
    if root is None:
        raise UserError(f"corpus {name} needs {package} installed; {fix}")
    docs = []
    for line in manifest.read_text().splitlines():
        rel, digest = line.split("\t")
        path = root / rel.split("/", 1)[1]
        data = path.read_bytes() if path.is_file() else None
        if data is None or sha256(data) != digest:
            have = _version(package)
            why = "is missing" if data is None else "differs from the committed manifest"
            raise UserError(f"corpus {name}: {path} {why} (installed {package} {have}); {fix}")
        docs.append((rel, data.decode("utf-8", errors="replace")))
    return docs


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def known() -> str:
    return ", ".join(sorted(p.stem for p in MANIFESTS.glob("*.tsv"))) or "none"


def manifest_digest(name: str) -> str:
    """16 hex digits of a manifest: a results file records it, and a resume compares it."""
    return sha256((MANIFESTS / f"{name}.tsv").read_bytes())[:16]
