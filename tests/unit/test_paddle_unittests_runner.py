"""The pure parts of tests/compat/paddle_unittests.py: the paddle -> spmd alias, the choice of
files, the classification of failures and the table. No Paddle checkout is needed: the files
below are small stand-ins written into a temporary folder."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest

COMPAT = pathlib.Path(__file__).resolve().parents[1] / "compat"
sys.path.insert(0, str(COMPAT))

import paddle_unittests as pu  # noqa: E402
import paddle_unittests_child as child  # noqa: E402


@pytest.fixture
def alias():
    child.install()
    try:
        yield
    finally:
        child.uninstall()


def test_alias_gives_spmds_modules_under_paddles_names(alias):
    import paddle.fluid as fluid
    import paddle.fluid.layers as layers
    from paddle.fluid import compiler

    import spmd.fluid
    assert fluid is spmd.fluid
    assert layers is spmd.fluid.layers
    assert compiler is spmd.fluid.compiler
    # the alias keeps the module's own spec, so spmd's own imports are not disturbed
    assert fluid.__spec__.name == "spmd.fluid"


def test_alias_names_the_paddle_module_that_is_missing(alias):
    with pytest.raises(ModuleNotFoundError, match=r"paddle\.fluid\.no_such_module.*"
                                                  r"spmd\.fluid\.no_such_module"):
        import paddle.fluid.no_such_module  # noqa: F401


def test_uninstall_removes_the_alias():
    child.install()
    import paddle  # noqa: F401
    child.uninstall()
    assert "paddle" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        import paddle  # noqa: F401,F811


def test_the_tests_package_path_finds_a_sibling(tmp_path, alias):
    (tmp_path / "sibling_helper_xyz.py").write_text("VALUE = 7\n")
    sys.path.insert(0, str(tmp_path))
    try:
        from paddle.fluid.tests.unittests.sibling_helper_xyz import VALUE
        assert VALUE == 7
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("sibling_helper_xyz", None)


def _write(folder: pathlib.Path, name: str, text: str) -> None:
    (folder / name).write_text(textwrap.dedent(text))


@pytest.fixture
def checkout(tmp_path):
    folder = tmp_path / pu.UNITTESTS
    folder.mkdir(parents=True)
    _write(folder, "op_test.py", "class OpTest: pass\n")
    _write(folder, "test_mul_op.py", "from op_test import OpTest\nclass TestMul(OpTest): pass\n")
    _write(folder, "test_mul_more.py",
           "from test_mul_op import TestMul\nclass TestMore(TestMul): pass\n")
    _write(folder, "test_imperative_mnist.py", "import unittest\n")
    _write(folder, "test_fuse_nccl_gpu.py", "import unittest\n")
    _write(folder, "test_scope.py", "import unittest\n")
    _write(folder, "test_sum_operator.py", "from paddle.fluid.op import Operator\n")
    _write(folder, "test_cond.py", """\
        import unittest
        import simple_nets
        class TestCond(unittest.TestCase):
            def test_static(self):
                pass
            def test_eager(self):
                self.run_dygraph()
            def run_dygraph(self):
                with fluid.dygraph.guard():
                    pass
        class TestCondMore(TestCond):
            def test_more(self):
                pass
        """)
    _write(folder, "simple_nets.py", "import dist_model\n")
    _write(folder, "dist_model.py", "x = 1\n")
    _write(folder, "test_dist_thing.py", "RUN = 'dist_model.py'\n"
           "class TestThing:\n    def test_run(self):\n        pass\n")
    _write(folder, "test_dist_harness.py", "class TestDistBase: pass\n")
    (folder / "mkldnn").mkdir()
    _write(folder / "mkldnn", "test_conv_mkldnn.py", "")
    return tmp_path


def test_select_chooses_by_rule_and_counts_what_it_leaves_out(checkout):
    sel = pu.select(checkout)
    assert sel.chosen == {"test_cond.py": "control flow", "test_dist_thing.py": "dist harness"}
    # the subclass runs its base's dygraph test too: both ids are deselected
    assert sel.deselected == {"test_cond.py": ["TestCond.test_eager", "TestCondMore.test_eager"]}
    assert sorted(sel.left_out["OpTest harness (C++ operators)"]) == [
        "mkldnn/test_conv_mkldnn.py", "test_mul_more.py", "test_mul_op.py"]
    assert sel.left_out["dygraph"] == ["test_imperative_mnist.py"]
    assert sel.left_out["GPU-only"] == ["test_fuse_nccl_gpu.py"]
    assert sel.left_out["drives C++ operators directly (fluid.op.Operator)"] == [
        "test_sum_operator.py"]
    assert sel.left_out["not the static API: C++ Scope binding"] == ["test_scope.py"]
    assert sel.left_out["no test method (a harness module)"] == ["test_dist_harness.py"]
    text = pu.left_out_text(sel)
    assert text.startswith("chosen: 2 files (2 dygraph test methods in 1 of them deselected)")
    assert "3 OpTest harness" in text


def test_helpers_follow_imports_and_named_scripts(checkout):
    assert pu.helpers(checkout, ["test_cond.py"]) == ["dist_model.py", "simple_nets.py"]
    assert pu.helpers(checkout, ["test_dist_thing.py"]) == ["dist_model.py"]


def _outcome(file, rc=0, records=(), import_error=None, run=3, skipped=0, cause=""):
    summary = {"file": file, "tests": run, "run": run, "skipped": skipped, "deselected": 0,
               "records": list(records), "import_error": import_error}
    return pu.Outcome(file, rc, summary, "", cause)


def _rec(exc_type, message):
    return {"id": "T.test", "kind": "error", "exc_type": exc_type,
            "message": f"{exc_type}: {message}", "where": "", "traceback": ""}


@pytest.mark.parametrize("exc_type, message, name", [
    ("ModuleNotFoundError", "No module named 'paddle.fluid.evaluator' (aliased to "
     "'spmd.fluid.evaluator')", "fluid.evaluator"),
    ("ImportError", "cannot import name 'Tensor' from 'spmd.fluid' (/x/__init__.py)",
     "fluid.Tensor"),
    ("AttributeError", "module 'spmd.fluid.layers' has no attribute 'basic_lstm'",
     "fluid.layers.basic_lstm"),
    ("AttributeError", "'Program' object has no attribute '_is_distributed'",
     "Program._is_distributed"),
    ("AttributeError", "type object 'VarType' has no attribute 'LOD_TENSOR'",
     "VarType.LOD_TENSOR"),
    ("ValueError", "module 'spmd.fluid' has no attribute 'x'", None),
    ("NameError", "name 'Categorical' is not defined", "Categorical"),
    ("AttributeError", "'list' object has no attribute 'get'", None),
])
def test_missing_name_reads_the_name_from_the_message(exc_type, message, name):
    assert pu.missing_name(_rec(exc_type, message)) == name


def test_classify_by_rule():
    missing = _outcome("a.py", import_error=_rec("ImportError",
                       "cannot import name 'DatasetFactory' from 'spmd.fluid' (x)"))
    assert pu.classify(missing) == (pu.MISSING, "fluid.DatasetFactory", ["fluid.DatasetFactory"])
    wrong = _outcome("b.py", records=[_rec("AssertionError", "0.5 != 0.25\nmore")])
    assert pu.classify(wrong)[:2] == (pu.BEHAVIOUR, "AssertionError: 0.5 != 0.25")
    hung = pu.Outcome("c.py", None, None, "")
    assert pu.classify(hung)[:2] == (pu.BEHAVIOUR, "timeout (the file did not finish)")


def test_classify_takes_the_cause_from_the_processes_a_harness_started():
    dist = _outcome("test_dist_x.py", records=[_rec("EOFError", "Ran out of input")],
                    cause="AttributeError: module 'spmd.fluid' has no attribute 'Tensor'")
    assert pu.classify(dist)[:2] == (pu.MISSING, "fluid.Tensor")


@pytest.mark.parametrize("message, klass, what", [
    ("PreconditionError: paddle.dataset.mnist: the data file t.gz is not in the cache folder "
     "/root/.cache/paddle/dataset/mnist and spmd never downloads", pu.OUT_OF_SCOPE,
     "data set mnist not cached (no internet here; fluid would download it)"),
    ("AttributeError: module 'numpy' has no attribute 'product'", pu.OUT_OF_SCOPE,
     "the test's own call np.product, which this numpy has not"),
    ("AttributeError: 'NoneType' object has no attribute 'get_tensor'", pu.BEHAVIOUR,
     "spmd returns a NoneType where fluid's object has .get_tensor"),
])
def test_message_rules_give_the_class(message, klass, what):
    exc_type, _, rest = message.partition(": ")
    outcome = _outcome("e.py", records=[_rec(exc_type, rest)])
    assert pu.classify(outcome)[:2] == (klass, what)


def test_a_behaviour_says_where_the_test_saw_it():
    record = _rec("AssertionError", "0 != 1")
    record["traceback"] = ('Traceback (most recent call last):\n  File "/x/test_init.py", '
                           'line 331, in test_xavier\n    self.assertEqual(len(ops), 1)\n'
                           'AssertionError: 0 != 1\n')
    assert pu.classify(_outcome("f.py", records=[record]))[1] == (
        "AssertionError: 0 != 1 at test_init.py:331 `self.assertEqual(len(ops), 1)`")


def test_stored_judgement_wins(monkeypatch):
    monkeypatch.setitem(pu.STORED, "d.py", (pu.OUT_OF_SCOPE, "needs the C++ profiler"))
    failing = _outcome("d.py", records=[_rec("AssertionError", "x")])
    assert pu.classify(failing)[:2] == (pu.OUT_OF_SCOPE, "needs the C++ profiler")


def test_last_exception_reads_a_child_stderr_printed_as_bytes():
    text = "local_stderr: b'Traceback (most recent call last):\\n  File \"x\"\\n" \
           "ValueError: bad shape [2, 3]\\n'\nrest"
    assert pu.last_exception(text) == "ValueError: bad shape [2, 3]"
    # the harness's own EOFError on the dead process's empty output is not the cause
    assert pu.last_exception(text + "\nEOFError: Ran out of input\n") == (
        "ValueError: bad shape [2, 3]")


def test_table_counts_per_area_and_sets_apart_what_fails_on_fluid():
    sel = pu.Selection(chosen={"p.py": "io", "f.py": "io", "g.py": "layers", "o.py": "layers"})
    outcomes = [_outcome("p.py"),
                _outcome("f.py", records=[_rec("AssertionError", "1 != 2")]),
                _outcome("g.py", import_error=_rec("ModuleNotFoundError",
                         "No module named 'paddle.fluid.evaluator' (aliased)")),
                _outcome("o.py", records=[_rec("AssertionError", "3 != 4")])]
    oracle = {"p.py": True, "f.py": True, "g.py": True, "o.py": "environment: timeout"}
    text = pu.table(sel, outcomes, oracle)
    assert "| io | 2 | 1 | 1 | 0 | 1 | 0 | 0 |" in text
    assert "| layers | 1 | 0 | 1 | 1 | 0 | 0 | 0 |" in text
    assert "| **all** | 3 | 1 | 2 | 1 | 1 | 0 | 0 |" in text
    assert "1 of 3 files pass (33%)." in text
    assert "| layers | g.py | missing name | fluid.evaluator |" in text
    assert "Counted apart (1: 1 environment)" in text and "| o.py | environment: timeout |" in text


def test_oracle_verdicts_tell_gpu_only_files_apart():
    verdicts = pu.oracle_verdicts([_outcome("a.py"), _outcome("b.py", skipped=3),
                                   _outcome("c.py", records=[_rec("OSError", "no data")]),
                                   pu.Outcome("d.py", None, None, "")])
    assert verdicts["a.py"] is True
    assert verdicts["b.py"].startswith("GPU-only")
    assert verdicts["c.py"] == "fluid's own bug: OSError: no data"
    assert verdicts["d.py"] == "environment: timeout (the file did not finish)"


def test_the_child_runs_a_file_with_the_alias_and_reports_each_failure(tmp_path):
    _write(tmp_path, "test_tiny.py", """\
        import unittest
        import paddle.fluid as fluid
        class T(unittest.TestCase):
            def test_ok(self):
                self.assertTrue(hasattr(fluid, "Program"))
            def test_missing(self):
                fluid.layers.no_such_layer_xyz
            def test_left_out(self):
                raise RuntimeError("deselected, never runs")
        """)
    outcome = pu.run_files(tmp_path, {"test_tiny.py": ["T.test_left_out"]}, sys.executable,
                           True, 120, 1, [])[0]
    assert outcome.rc == 0
    assert (outcome.summary["run"], outcome.summary["deselected"]) == (2, 1)
    assert pu.classify(outcome)[:2] == (pu.MISSING, "fluid.layers.no_such_layer_xyz")


def test_the_command_lists_chosen_files_and_helpers(checkout):
    out = subprocess.run([sys.executable, str(COMPAT / "paddle_unittests.py"), str(checkout),
                          "--list"], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["test_cond.py", "test_dist_thing.py", "dist_model.py",
                                  "simple_nets.py"]


def test_left_out_files_run_as_their_own_table(checkout, tmp_path):
    """--left-out KIND measures the files the rules leave out as KIND, in a table of their own
    (the chosen set's figure is untouched); the stand-ins here have no test to run."""
    out = subprocess.run([sys.executable, str(COMPAT / "paddle_unittests.py"), str(checkout),
                          "--left-out", "OpTest harness (C++ operators)", "--jobs", "1",
                          "--only", "test_mul_op.py", "test_mul_more.py",
                          "--json", str(tmp_path / "out.json")],
                         capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.startswith("left out as OpTest harness (C++ operators): 2 files run")
    assert "| OpTest harness (C++ operators) | 2 | 0 | 2 |" in out.stdout
    assert "test_cond.py" not in out.stdout  # the chosen files are not run
    bad = subprocess.run([sys.executable, str(COMPAT / "paddle_unittests.py"), str(checkout),
                          "--left-out", "no such kind"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "the kinds are" in bad.stderr


def test_a_child_process_has_the_removed_names_the_tests_call(tmp_path):
    """Paddle 1.8's tests call np.product and collections.Sequence (numpy 1.x, Python 3.7);
    the children get them back as aliases, this process is left as it is."""
    env = pu.child_env(True, [], str(tmp_path))
    code = ("import collections, collections.abc, numpy as np; "
            "print(np.product([2, 3]), collections.Sequence is collections.abc.Sequence)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.split() == ["6", "True"], out.stderr
