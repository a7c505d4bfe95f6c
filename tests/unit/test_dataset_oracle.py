"""spmd.dataset against PaddlePaddle 1.8.5's own paddle.dataset, both reading the same tiny
files (tests/dataset_fixtures.py; the oracle's samples are in tests/oracle/data/dataset.json,
made by tests/oracle/make_dataset.py)."""
from __future__ import annotations

import json

import pytest
from dataset_fixtures import CASES, canon, write_all
from oracle_io import load

import spmd
from spmd.dataset.common import DatasetMD5Warning

ORACLE = load("dataset")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    # one folder for all cases, in CASES order, as the oracle ran them (wmt16 keeps its
    # dictionaries there)
    folder = tmp_path_factory.mktemp("paddle_dataset")
    write_all(str(folder))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spmd.dataset.common, "DATA_HOME", str(folder))
        yield folder


@pytest.mark.filterwarnings("ignore", category=DatasetMD5Warning)
@pytest.mark.parametrize("name", list(CASES))
def test_same_samples_as_paddle(home, name):
    got = json.loads(json.dumps(canon(CASES[name](spmd.dataset))))
    assert got == ORACLE[name]


def test_every_case_has_an_oracle_answer():
    assert sorted(ORACLE) == sorted(CASES)
