"""Samples PaddlePaddle 1.8.5's own paddle.dataset (flowers, sentiment, mq2007, voc2012, image;
OpenCV 4.2 and Pillow installed beside it) gives for the tiny files of
tests/dataset_fixtures_more.py, for tests/unit/test_dataset_more.py. Run with the oracle:

    cd /tmp && /tmp/pd18/bin/python /path/to/tests/oracle/make_dataset_more.py

As in make_dataset.py, Paddle's download() is replaced by one returning the cached path (the
tiny files' md5s are not Paddle's). mq2007 unpacks its RAR archive first, which needs the unrar
tool: that step is replaced by pointing at the text files the fixtures lay out where the
archive unpacks. fluid 1.8.5's voc2012 reader fails on Python 3 (KeyError); beside that
failure, the arrays Pillow decodes from the same members are stored as "voc2012_pil".
"""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import cv2  # noqa: E402
import paddle  # noqa: E402
import paddle.dataset as ds  # noqa: E402
import paddle.dataset.common as common  # noqa: E402
from dataset_fixtures import canon  # noqa: E402
from dataset_fixtures_more import CASES, voc_expected_with_pil, write_more  # noqa: E402
from oracle_io import save  # noqa: E402


def cached_path(url, module_name, md5sum, save_name=None):
    name = save_name if save_name is not None else url.split("/")[-1]
    path = os.path.join(common.DATA_HOME, module_name, name)
    if not os.path.exists(path):
        raise RuntimeError("fixture file missing: " + path)
    return path


def main():
    home = tempfile.mkdtemp(prefix="paddle_dataset_more_")
    try:
        write_more(home)
        common.DATA_HOME = home
        common.download = cached_path
        for module in (ds.flowers, ds.voc2012, ds.mq2007):
            module.download = cached_path
        ds.mq2007.__initialize_meta_info__ = lambda: os.path.join(home, "MQ2007")
        cases = {}
        for name, run in CASES.items():
            cases[name] = canon(run(ds))
            print(name, "ok")
        cases["voc2012_pil"] = canon(voc_expected_with_pil())
        save("dataset_more", cases, meta={"paddle": paddle.__version__,
                                          "opencv": cv2.__version__,
                                          "source": "tests/dataset_fixtures_more.py"})
    finally:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
