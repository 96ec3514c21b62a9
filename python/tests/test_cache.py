"""The cache functions, with the `jitk` tool's meaning, on this run's own cache folder."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitk


def use_kernel(hidden):
    k = jitk.get("softmax", dtype="f32", hidden=hidden, target="cpu")
    x = np.ones((2, hidden), np.float32)
    k(x, np.empty_like(x))
    return k


def keys():
    return {a["key"] for a in jitk.cache.ls()}


def test_root_is_this_runs_folder():
    assert jitk.cache.root() == os.environ["JITK_CACHE_DIR"]
    assert jitk.cache.unavailable_reason() == ""


def test_a_compiled_kernel_is_listed_and_counted():
    k = use_kernel(24)
    listed = [a for a in jitk.cache.ls() if a["key"] == k.cache_key]
    assert len(listed) == 1
    a = listed[0]
    assert a["kernel"] == "softmax" and "hidden=24" in a["params"] and a["backend"] == "cpu" and a["size_bytes"] > 0
    s = jitk.cache.stats()
    assert s["entries"] >= 1 and s["bytes"] >= a["size_bytes"]


def test_clear_one_kernel_then_everything():
    use_kernel(40)
    jitk.get("saxpy", dtype="f64", target="cpu")
    removed = jitk.cache.clear(kernel="softmax")
    assert removed["entries"] >= 1
    assert all(a["kernel"] != "softmax" for a in jitk.cache.ls())
    assert any(a["kernel"] == "saxpy" for a in jitk.cache.ls())
    jitk.cache.clear()
    assert jitk.cache.ls() == [] and jitk.cache.stats()["entries"] == 0


def test_prune_checks_every_argument_before_removing_anything():
    use_kernel(56)
    before = keys()
    for bad, err in [("2 gigs", ValueError), (-1, ValueError), (True, TypeError), ([1], TypeError), (2**64, ValueError)]:
        with pytest.raises(err):
            jitk.cache.prune(max_size=bad)
        with pytest.raises(err):
            jitk.cache.prune(max_size="1G", older_than=bad)
    for bad in [float("nan"), float("inf"), -float("inf"), 1e30]:
        with pytest.raises(ValueError, match="older_than"):
            jitk.cache.prune(older_than=bad)
    assert keys() == before
    env = os.environ.pop("JITK_CACHE_MAX_SIZE", None)
    try:
        with pytest.raises(ValueError, match="max_size and/or older_than"):
            jitk.cache.prune()
    finally:
        if env is not None:
            os.environ["JITK_CACHE_MAX_SIZE"] = env
    assert jitk.cache.prune(max_size="1G")["entries"] == 0  # everything fits
    assert keys() == before
    assert jitk.cache.prune(max_size=0)["entries"] == len(before)
    assert keys() == set()


def test_prune_stale_keeps_current_artifacts():
    use_kernel(72)
    r = jitk.cache.prune(stale=True)
    assert r["stale_entries"] == 0 and r["entries"] == 0
    assert any(a["kernel"] == "softmax" for a in jitk.cache.ls())


def test_verify_finds_and_fixes_a_damaged_blob():
    k = use_kernel(88)
    assert jitk.cache.verify() == []
    blob = os.path.join(jitk.cache.root(), "blobs", k.cache_key[:2], k.cache_key)
    with open(blob, "r+b") as f:
        f.seek(os.path.getsize(blob) // 2)
        f.write(b"\xde\xad\xbe\xef")
    problems = jitk.cache.verify()
    assert [key for key, _ in problems] == [k.cache_key]
    jitk.cache.verify(fix=True)
    assert jitk.cache.verify() == []
    assert k.cache_key not in keys()


def test_warm_compiles_then_finds_cached(tmp_path):
    manifest = tmp_path / "warm.toml"
    manifest.write_text(textwrap.dedent("""
        [[kernel]]
        name = "saxpy"
        target = "cpu"
        params = { dtype = ["f32", "f64"] }
    """))
    jitk.cache.clear(kernel="saxpy")
    first = jitk.cache.warm(manifest, jobs=2)
    assert sorted(r["outcome"] for r in first) == ["compiled", "compiled"]
    assert {r["params"] for r in first} == {"dtype=f32", "dtype=f64"}
    second = jitk.cache.warm(str(manifest))
    assert [r["outcome"] for r in second] == ["cached", "cached"]


def test_warm_refuses_a_bad_manifest(tmp_path):
    with pytest.raises(FileNotFoundError):
        jitk.cache.warm(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('[[kernel]]\nname = "rms_norm"\ntarget = "cpu"\nparams = { dtype = "f32", hidden = -4 }\n')
    with pytest.raises(jitk.Error) as e:
        jitk.cache.warm(bad)
    assert e.value.kind == "manifest" and "hidden" in str(e.value)
    with pytest.raises(ValueError, match="jobs"):
        jitk.cache.warm(bad, jobs=0)


def test_export_and_import_a_pack(tmp_path):
    k = use_kernel(104)
    pack = tmp_path / "cpu.jitkpack"
    r = jitk.cache.export_pack(pack, target="cpu")
    assert r["artifacts"] >= 1 and pack.stat().st_size > 0
    jitk.cache.clear()
    r = jitk.cache.import_pack(pack)
    assert r["imported"] >= 1
    assert k.cache_key in keys()
    damaged = tmp_path / "damaged.jitkpack"
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(jitk.Error):
        jitk.cache.import_pack(damaged)


def test_a_second_process_loads_from_disk():
    use_kernel(120)
    code = ("import jitk\n"
            "k = jitk.get('softmax', dtype='f32', hidden=120, target='cpu')\n"
            "print(k.origin)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "disk cache"


def test_backends_lists_the_cpu():
    cpu = [b for b in jitk.cache.backends() if b["name"] == "cpu"]
    assert cpu and cpu[0]["available"]
