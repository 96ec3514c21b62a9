"""The kernel cache, as the `jitk` tool sees it: stats, ls, clear, prune, verify, warm, export, import.

Each function calls the library function the tool calls (jit/cache.hpp), with the same meaning."""
from __future__ import annotations

import math
import os

from . import _jitk

_c = _jitk._cache

__all__ = ["root", "stats", "ls", "clear", "prune", "verify", "warm", "export_pack", "import_pack", "backends",
           "unavailable_reason"]


def root() -> str:
    """The cache's folder ($JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk, else ~/.cache/jitk)."""
    return _c.root()


def unavailable_reason() -> str:
    """"" when the cache is on disk, else why this process keeps kernels in memory only."""
    return _c.unavailable_reason()


def stats() -> dict:
    """entries, bytes, hits, misses, compiles (as `jitk stats`)."""
    return _c.stats()


def ls() -> list[dict]:
    """One dict an artifact (key, kernel, params, backend, arch, compiler, size_bytes, compile_ms, created,
    last_used, hits, implementation, implementation_version, launch), as `jitk ls`."""
    return _c.ls()


def clear(kernel: str | None = None) -> dict:
    """Removes every artifact, or one kernel's (`jitk clear [--kernel K]`); returns entries and bytes removed."""
    return _c.clear(kernel)


def _amount(value, what, *, kind: str, unit: str, numbers, parse, examples: tuple[str, ...]):
    """None, a non-negative number of `unit`, or text `parse` reads ("2G", "30d"), as a whole number."""
    if value is None:
        return None
    wanted = f"{what} must be {kind} such as '{examples[0]}' or a number of {unit}"
    if isinstance(value, bool):
        raise TypeError(f"{wanted}, got {value!r}")
    if isinstance(value, numbers):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what} must be a finite number of {unit}, got {value}")
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        if value >= 2**63:
            raise ValueError(f"{what} is too large: {value} {unit} (at most 2^63 - 1)")
        return int(value)
    if isinstance(value, str):
        parsed = parse(value)
        if parsed is None:
            raise ValueError(f"{what} '{value}' is not {kind} (e.g. {', '.join(examples)})")
        return parsed
    raise TypeError(f"{wanted}, got {type(value).__name__}")


def _size(value, what):
    return _amount(value, what, kind="a size", unit="bytes", numbers=int, parse=_c.parse_size, examples=("2G", "500M", "64K"))


def _age(value, what):
    return _amount(value, what, kind="an age", unit="seconds", numbers=(int, float), parse=_c.parse_age,
                   examples=("30d", "12h", "45m"))


def prune(max_size=None, older_than=None, *, stale: bool = False) -> dict:
    """Evicts least recently used artifacts down to max_size ("2G", or bytes) and those unused for
    older_than ("30d", or seconds), as `jitk prune`; with neither, $JITK_CACHE_MAX_SIZE. stale=True
    first removes artifacts of implementation versions this jitk no longer ships (`--stale`).

    Every argument is checked before anything is removed. Returns entries and bytes removed (and, with
    stale, stale_entries, stale_bytes, kept_unknown, unknown)."""
    max_bytes = _size(max_size, "max_size")
    seconds = _age(older_than, "older_than")
    out = {"entries": 0, "bytes": 0}
    if max_bytes is None and seconds is None and not stale:
        env = os.environ.get("JITK_CACHE_MAX_SIZE", "")
        max_bytes = _c.parse_size(env) if env else None
        if max_bytes is None:
            raise ValueError("give max_size and/or older_than (or set JITK_CACHE_MAX_SIZE)")
    if stale:
        r = _c.prune_stale()
        out.update(stale_entries=r["entries"], stale_bytes=r["bytes"], kept_unknown=r["kept_unknown"], unknown=r["unknown"])
        if max_bytes is None and seconds is None:
            return out
    r = _c.prune(max_bytes, seconds)
    out["entries"], out["bytes"] = r["entries"], r["bytes"]
    return out


def verify(fix: bool = False) -> list[tuple[str, str]]:
    """Checks every index row against its blob and every blob against its row (`jitk verify [--fix]`);
    returns (key, problem) pairs; fix=True drops what is bad."""
    return _c.verify(bool(fix))


def warm(manifest: str | os.PathLike, jobs: int | None = None) -> list[dict]:
    """Compiles every specialization a TOML manifest lists that is not cached yet (`jitk warm`), `jobs` at a
    time (default: all cores). One dict an item: kernel, target, params, origin, outcome ("compiled",
    "cached", "failed", "not started"), ms, error. A malformed manifest raises jitk.Error (kind Manifest)."""
    path = os.fspath(manifest)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"warm: no manifest at {path}")
    if jobs is None:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive int, got {jobs!r}")
    return _c.warm(path, jobs)


def export_pack(file: str | os.PathLike, target: str | None = None) -> dict:
    """Packs the cache (or one target's artifacts: "cpu", "cuda", "cuda:sm_90") into one file (`jitk export`)."""
    return _c.export_pack(os.fspath(file), target)


def import_pack(file: str | os.PathLike) -> dict:
    """Verifies a pack whole, then merges it into the cache (`jitk import`)."""
    return _c.import_pack(os.fspath(file))


def backends() -> list[dict]:
    """Each backend: name, available, detail (compiler and arch, or why not), as `jitk info`."""
    return _c.backends()
