"""Malformed checkpoint files are errors naming the file, the variable, what was expected and
what was found, raised before anything is allocated: random bytes, truncation, a header
announcing a huge shape, another dtype, a missing file, a file changed after its save, a
damaged manifest or journal. Extra files are left alone and ignored; checkpoints without a
manifest (numpy's own, older spmd's) load with the same header checks."""
from __future__ import annotations

import json
import os
import pathlib
import re
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.errors import InvalidArgumentError, NotFoundError
from spmd.io.files import MANIFEST

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "scripts"))
from save_checkpoint import SHAPES, program, save  # noqa: E402

RNG = np.random.default_rng(11)
VALUE = 4.0


def _save(directory, how: str = "per_file"):
    with fluid.scope_guard(fluid.Scope()):
        save(str(directory), VALUE, how)


def _load(directory, how: str = "per_file", prog=None, vars=None) -> dict:
    prog, scope = prog or program(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        if vars is not None:
            fluid.io.load_vars(exe, str(directory), prog, vars=vars)
        elif how == "per_file":
            fluid.io.load_persistables(exe, str(directory), prog)
        elif how == "one_file":
            fluid.io.load_persistables(exe, str(directory), prog, filename="all")
        else:
            fluid.load(prog, str(directory / "m"), exe)
    return {n: np.array(scope.get(n)) for n in (vars or SHAPES)}


def _fails(directory, error, *patterns, how: str = "per_file", **kw) -> str:
    with pytest.raises(error) as e:
        _load(directory, how, **kw)
    for pattern in patterns:
        assert re.search(pattern, str(e.value)), (pattern, str(e.value))
    return str(e.value)


def _npy_with_header(shape, descr: str = "<f4", data: bytes = b"") -> bytes:
    """An .npy file (version 1.0) whose header announces `shape`, followed by `data`."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    pad = 64 - (10 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


# -- one file per variable ---------------------------------------------------------------------
def test_random_bytes_name_the_file_and_variable_and_are_not_called_a_pickle(tmp_path):
    _save(tmp_path)
    junk = b"\x80\x04" + RNG.bytes(198)  # even bytes that start like a pickle
    (tmp_path / "b.npy").write_bytes(junk)
    msg = _fails(tmp_path, InvalidArgumentError,
                 r"variable 'b' from '[^']*b\.npy': it is not a \.npy file",
                 r"the manifest records shape \[4\], dtype float32",
                 r"found 200 bytes starting with b'\\x80\\x04")
    assert "pickle" not in msg


def test_a_truncated_file_names_announced_and_found_sizes(tmp_path):
    _save(tmp_path)
    data = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "a.npy").write_bytes(data[:-8])
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'a' from '[^']*a\.npy': the file is truncated: its header announces "
           rf"shape \[3, 4\] of float32 \({len(data)} bytes with the header\), the file has "
           rf"{len(data) - 8} bytes")


def test_a_header_announcing_a_huge_shape_fails_before_allocating(tmp_path):
    _save(tmp_path)
    (tmp_path / "c.npy").write_bytes(_npy_with_header((99999999999, 99999), data=b"\0" * 16))
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'c' from '[^']*c\.npy': the file is truncated: its header announces "
           r"shape \[99999999999, 99999\] of float32")
    # a shape that could be allocated is not either: the header is checked first
    (tmp_path / "c.npy").write_bytes(_npy_with_header((100_000_000,), data=b"\0" * 16))
    tracemalloc.start()
    try:
        _fails(tmp_path, InvalidArgumentError, r"variable 'c'.*shape \[100000000\]")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000, peak  # far below the 400 MB the header announces


def test_every_file_is_checked_before_any_is_read(tmp_path):
    prog = fluid.Program()
    for name, shape in (("big", [5_000_000]), ("bad", [4])):
        prog.global_block().create_parameter(name=name, shape=shape, dtype="float32")
    np.save(tmp_path / "big.npy", np.ones(5_000_000, "float32"))  # 20 MB, fine
    (tmp_path / "bad.npy").write_bytes(RNG.bytes(64))
    tracemalloc.start()
    try:
        _fails(tmp_path, InvalidArgumentError, r"variable 'bad' from '[^']*bad\.npy'",
               prog=prog, vars=["big", "bad"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000, peak  # big.npy was never read


def test_another_dtype_is_named_against_the_manifest_and_against_the_program(tmp_path):
    _save(tmp_path)
    np.save(tmp_path / "d.npy", np.full(5, VALUE, "float64"))
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'd' from '[^']*d\.npy': the file does not match the directory's manifest",
           r"manifest has shape \[5\], dtype float32, \d+ bytes.*the file has shape \[5\], dtype "
           r"float64")
    os.remove(tmp_path / MANIFEST)  # the files as they are: the program's declaration
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'd' loaded from '[^']*d\.npy' has shape \[5\] and dtype float64, but the "
           r"program declares shape \[5\] and dtype float32")


def test_a_missing_file_is_named_with_what_the_manifest_recorded(tmp_path):
    _save(tmp_path)
    os.remove(tmp_path / "moment.npy")
    _fails(tmp_path, NotFoundError,
           r"variable 'moment': its file '[^']*moment\.npy' does not exist; the directory's "
           r"manifest lists it \(the manifest records shape \[3, 4\]")


def test_a_file_changed_after_its_save_fails_its_checksum(tmp_path):
    _save(tmp_path)
    data = bytearray((tmp_path / "a.npy").read_bytes())
    data[-1] ^= 0x01  # the same size, shape and dtype; one bit of one value
    (tmp_path / "a.npy").write_bytes(bytes(data))
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'a' from '[^']*a\.npy': the file does not match the directory's manifest",
           r"CRC-32 \d+; the file has the same size but another CRC-32")


def test_extra_files_are_ignored_and_kept(tmp_path):
    _save(tmp_path)
    extras = {"notes.txt": b"mine", "e.npy": np.lib.format.magic(1, 0),
              ".a.npy.host.1.0123456789ab.tmp": b"a dead save's temporary"}
    for name, data in extras.items():
        (tmp_path / name).write_bytes(data)
    np.save(tmp_path / "unlisted.npy", np.zeros(3))  # beside a manifest that does not list it
    assert all((v == VALUE).all() for v in _load(tmp_path).values())
    prog = program()
    prog.global_block().create_parameter(name="unlisted", shape=[3], dtype="float64")
    assert (_load(tmp_path, prog=prog, vars=["unlisted"])["unlisted"] == 0).all()
    assert all((tmp_path / name).read_bytes() == data for name, data in extras.items())


# -- one archive -------------------------------------------------------------------------------
@pytest.mark.parametrize("how, file", [("one_file", "all"), ("paddle2", "m.pdparams")])
def test_archives_random_truncated_or_changed_name_the_file_and_variables(tmp_path, how, file):
    _save(tmp_path, how)
    path = tmp_path / file
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    where = rf"variable\(s\) \[[^]]*'a'[^]]*\] from '[^']*{file}': the file does not match"
    _fails(tmp_path, InvalidArgumentError, where, rf"manifest has {len(data)} bytes",
           rf"the file has {len(data) // 2} bytes", how=how)
    path.write_bytes(RNG.bytes(len(data)))
    _fails(tmp_path, InvalidArgumentError, where, "the same size but CRC-32", how=how)
    os.remove(tmp_path / MANIFEST)
    msg = _fails(tmp_path, InvalidArgumentError,
                 rf"variable\(s\) \[[^]]*'a'[^]]*\] from '[^']*{file}': it is not an \.npz "
                 rf"archive: expected a zip file \(b'PK'\), found {len(data)} bytes", how=how)
    assert "pickle" not in msg


def test_an_archive_member_announcing_a_huge_shape_is_named(tmp_path):
    with zipfile.ZipFile(tmp_path / "all", "w") as zf:  # an archive written by hand
        for name, shape in SHAPES.items():
            zf.writestr(f"{name}.npy", _npy_with_header(shape, data=b"\0" * 4 * int(np.prod(
                shape))) if name != "moment" else _npy_with_header((99999999999, 99999)))
    _fails(tmp_path, InvalidArgumentError,
           r"variable 'moment' from '[^']*all': the file is truncated: its header announces "
           r"shape \[99999999999, 99999\]", how="one_file")


def test_an_archive_missing_a_variable_names_it_and_what_it_holds(tmp_path):
    prog = program()
    with fluid.scope_guard(fluid.Scope()):
        for name, shape in SHAPES.items():
            fluid.global_scope().var(name).get_tensor().set(np.zeros(shape, "float32"))
        fluid.io.save_vars(fluid.Executor(), str(tmp_path), prog, vars=["a", "b"],
                           filename="all")
    _fails(tmp_path, NotFoundError,
           r"variable\(s\) \['c', 'd', 'cell/e', 'moment'\]: not in '[^']*all', which holds "
           r"\['a', 'b'\]",
           how="one_file")


# -- the manifest and journal themselves; checkpoints without them ------------------------------
def test_a_damaged_manifest_or_journal_is_named_with_the_fix(tmp_path):
    _save(tmp_path)
    (tmp_path / MANIFEST).write_text("{not json")
    _fails(tmp_path, InvalidArgumentError,
           rf"cannot read the checkpoint manifest '[^']*{MANIFEST}'.*delete it")
    _save(tmp_path)  # a save replaces it
    assert all((v == VALUE).all() for v in _load(tmp_path).values())
    journal = tmp_path / ".spmd-journal.host.1.0123456789ab.json"
    journal.write_text('{"renames": [["../x", "a.npy"]]}')
    _fails(tmp_path, InvalidArgumentError,
           r"the journal '[^']*spmd-journal[^']*' of an interrupted save is damaged.*not a file "
           r"name: '\.\./x'.*Save the checkpoint again, then delete the journal")
    _save(tmp_path)  # which the fix can do
    journal.unlink()
    assert all((v == VALUE).all() for v in _load(tmp_path).values())


@pytest.mark.parametrize("manifest", ["none", "flat"])
def test_checkpoints_without_a_current_manifest_load_with_header_checks(tmp_path, manifest):
    for name, shape in SHAPES.items():  # as numpy writes them, or an spmd of before
        (tmp_path / f"{name}.npy").parent.mkdir(exist_ok=True)  # cell/ for cell/e
        np.save(tmp_path / f"{name}.npy", np.full(shape, VALUE, "float32"))
    if manifest == "flat":
        sizes = {f"{n}.npy": {"bytes": (tmp_path / f"{n}.npy").stat().st_size, "shape": s,
                              "dtype": "<f4"} for n, s in SHAPES.items()}
        (tmp_path / MANIFEST).write_text(json.dumps(sizes))
    assert all((v == VALUE).all() for v in _load(tmp_path).values())
    (tmp_path / "a.npy").write_bytes(RNG.bytes(100))
    _fails(tmp_path, InvalidArgumentError, r"variable 'a' from '[^']*a\.npy': it is not a \.npy")


def test_no_module_of_spmd_io_can_unpickle():
    import ast

    import spmd.io

    root = pathlib.Path(spmd.io.__file__).parent
    for module in sorted(root.glob("*.py")):
        tree = ast.parse(module.read_text())
        imported = {a.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert not imported & {"pickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            for kw in call.keywords:
                if kw.arg == "allow_pickle":
                    assert isinstance(kw.value, ast.Constant) and kw.value.value is False, \
                        f"{module.name}:{call.lineno}"
