"""fluid.contrib.utils.hdfs_utils and fluid.incubate.fleet.utils.hdfs: the HDFS clients run
`hadoop fs` commands; here a stand-in `hadoop` (a script over a local folder, speaking the
commands and the 8-column listing of the real one) serves them."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest

from spmd.fluid.contrib.utils import HDFSClient, multi_download, multi_upload
from spmd.fluid.incubate.fleet.utils.hdfs import HDFSClient as FleetHDFSClient

FAKE = textwrap.dedent('''\
    #!{python}
    import os, shutil, sys, time
    root = os.environ["FAKE_HDFS_ROOT"]
    args = [a for a in sys.argv[2:] if not a.startswith("-D")]
    cmd, rest = args[0], args[1:]
    def p(x): return os.path.join(root, x.lstrip("/"))
    def row(path):
        st = os.stat(p(path))
        kind = "d" if os.path.isdir(p(path)) else "-"
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.st_mtime))
        print(f"{{kind}}rw-r--r-- 3 user group {{st.st_size}} {{stamp}} {{path}}")
    if cmd == "-test":
        ok = os.path.isdir(p(rest[1])) if rest[0] == "-d" else os.path.exists(p(rest[1]))
        sys.exit(0 if ok else 1)
    elif cmd == "-put":
        os.makedirs(os.path.dirname(p(rest[1])), exist_ok=True)
        (shutil.copytree if os.path.isdir(rest[0]) else shutil.copy)(
            rest[0], p(rest[1]) if not os.path.isdir(p(rest[1])) else
            os.path.join(p(rest[1]), os.path.basename(rest[0])))
    elif cmd == "-get":
        shutil.copy(p(rest[0]), rest[1])
    elif cmd in ("-rm", "-rmr"):
        (shutil.rmtree if cmd == "-rmr" else os.remove)(p(rest[0]))
    elif cmd == "-mv":
        os.rename(p(rest[0]), p(rest[1]))
    elif cmd == "-mkdir":
        os.makedirs(p(rest[0]), exist_ok=True)
    elif cmd == "-cat":
        print(open(p(rest[0])).read())
    elif cmd == "-ls":
        for name in sorted(os.listdir(p(rest[0]))):
            row(os.path.join(rest[0], name))
    elif cmd == "-lsr":
        for d, dirs, files in sorted(os.walk(p(rest[0]))):
            for name in sorted(dirs) + sorted(files):
                row("/" + os.path.relpath(os.path.join(d, name), root))
    else:
        sys.exit(2)
''')


@pytest.fixture
def hadoop(tmp_path, monkeypatch):
    home = tmp_path / "hadoop"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "hadoop"
    script.write_text(FAKE.format(python=sys.executable))
    script.chmod(0o755)
    root = tmp_path / "hdfs"
    root.mkdir()
    monkeypatch.setenv("FAKE_HDFS_ROOT", str(root))
    return str(home), root


def test_client_round_trip(hadoop, tmp_path):
    home, root = hadoop
    client = HDFSClient(home, {"fs.default.name": "hdfs://nn:9000"})
    local = tmp_path / "part-0"
    local.write_text("hello")
    assert client.makedirs("/data") and client.is_dir("/data")
    assert client.upload("/data/part-0", str(local))
    assert not client.upload("/data/part-0", str(local))  # exists, no overwrite
    assert client.upload("/data/part-0", str(local), overwrite=True)
    assert client.is_exist("/data/part-0") and client.is_file("/data/part-0")
    assert client.ls("/data") == ["/data/part-0"] and client.cat("/data/part-0") == "hello"
    got = tmp_path / "back" / "part-0"
    assert client.download("/data/part-0", str(got)) and got.read_text() == "hello"
    assert client.rename("/data/part-0", "/data/part-1")
    assert client.lsr("/data") == ["/data/part-1"]
    assert client.delete("/data") and not client.is_exist("/data")
    assert client.ls("/nothing") == []


def test_multi_upload_and_download_share_files(hadoop, tmp_path):
    home, root = hadoop
    client = HDFSClient(home, {})
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"f{i}").write_text(str(i))
    multi_upload(client, "/in", str(src), multi_processes=2)
    assert sorted(os.listdir(root / "in")) == ["f0", "f1", "f2", "f3"]
    mine = multi_download(client, "/in", str(tmp_path / "t1"), trainer_id=1, trainers=2)
    assert sorted(os.path.basename(m) for m in mine) == ["f1", "f3"]
    assert (tmp_path / "t1" / "f3").read_text() == "3"


def test_fleet_client_split_and_directories(hadoop, tmp_path):
    home, root = hadoop
    client = FleetHDFSClient(home, {})
    assert FleetHDFSClient.split_files(list(range(5)), 0, 2) == [0, 1, 2]
    assert FleetHDFSClient.split_files(list(range(5)), 1, 2) == [3, 4]
    d = tmp_path / "model"
    d.mkdir()
    (d / "w").write_text("w")
    assert client.upload_dir("/save", str(d))
    assert client.is_file("/save/model/w")
    got = client.download("/save/model", str(tmp_path / "restored"))
    assert [os.path.basename(g) for g in got] == ["w"]
