"""Samples PaddlePaddle 1.8.5's own paddle.dataset reads from the tiny data set files of
tests/dataset_fixtures.py, for tests/unit/test_dataset_oracle.py. Run with the oracle:

    cd /tmp && /path/to/oracle-venv/bin/python /path/to/tests/oracle/make_dataset.py

The tiny files' md5s are not Paddle's, and Paddle would then try to download the real files:
its download() is replaced by one that returns the cached path (the file must exist), and the
housing loader's feature-range plot is turned off. Everything else is Paddle's code.
"""
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import paddle.dataset as ds  # noqa: E402
import paddle.dataset.common as common  # noqa: E402
import paddle.dataset.uci_housing as uci_housing  # noqa: E402
from dataset_fixtures import CASES, canon, write_all  # noqa: E402
from oracle_io import save  # noqa: E402


def cached_path(url, module_name, md5sum, save_name=None):
    name = save_name if save_name is not None else url.split("/")[-1]
    path = os.path.join(common.DATA_HOME, module_name, name)
    if not os.path.exists(path):
        raise RuntimeError("fixture file missing: " + path)
    return path


def main():
    home = tempfile.mkdtemp(prefix="paddle_dataset_")
    try:
        write_all(home)
        common.DATA_HOME = home
        common.download = cached_path
        uci_housing.feature_range = lambda maximums, minimums: None
        cases = {}
        for name, run in CASES.items():
            cases[name] = canon(run(ds))
            print(name, "ok")
        save("dataset", cases, meta={"paddle": "1.8.5", "source": "tests/dataset_fixtures.py"})
    finally:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
