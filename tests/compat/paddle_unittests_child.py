"""The child side of tests/compat/paddle_unittests.py: the `paddle` -> `spmd` import alias and
the run of one Paddle unit-test file.

It runs under whichever interpreter is measured (the project's Python 3.11 venv, or fluid
1.8.5's Python 3.7 venv for the oracle run), so it uses the standard library only and no
syntax newer than Python 3.7.

    PYTHONPATH=<dir holding a sitecustomize.py that calls install()> \\
        python paddle_unittests_child.py <test_file.py> <result.json> [deselected ids ...]

The alias is installed from a sitecustomize.py (made by the parent in a temporary folder and
put first on PYTHONPATH) so that the processes a test starts itself (test_dist_base's
trainers and pservers run `sys.executable dist_mnist.py`) get it too.
"""
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import types
import unittest

TESTS_PACKAGE = "paddle.fluid.tests.unittests"


def spmd_name(fullname):
    """The spmd module a `paddle...` import names, or None when the name is not paddle's.

    >>> spmd_name("paddle.fluid.layers")
    'spmd.fluid.layers'
    """
    if fullname == "paddle" or fullname.startswith("paddle."):
        return "spmd" + fullname[len("paddle"):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module
        self.own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        # the target module ran already, under its own name; the alias only shares it, and
        # gives back the spec the import machinery replaced by the alias's
        if self.own_spec is not None:
            module.__spec__ = self.own_spec


class PaddleAlias(importlib.abc.MetaPathFinder):
    """Makes `import paddle.fluid.X` give `spmd.fluid.X` (the same module object).

    `paddle.fluid.tests.unittests.<name>` stays the test folder's own `<name>` module, so
    tests that import a sibling by its package path find it.
    """

    def find_spec(self, fullname, path=None, target=None):
        target_name = spmd_name(fullname)
        if target_name is None:
            return None
        if fullname in ("paddle.fluid.tests", TESTS_PACKAGE):
            module = types.ModuleType(fullname)
            module.__path__ = []
            return importlib.util.spec_from_loader(fullname, _AliasLoader(module))
        if fullname.startswith(TESTS_PACKAGE + "."):
            sibling = fullname[len(TESTS_PACKAGE) + 1:]
            return importlib.util.spec_from_loader(
                fullname, _AliasLoader(importlib.import_module(sibling)))
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as err:
            if err.name is not None and spmd_name(err.name) is None and \
                    not err.name.startswith("spmd"):
                raise  # a third-party module spmd needs: not an alias question
            raise ModuleNotFoundError(
                f"No module named '{fullname}' (aliased to '{target_name}')",
                name=fullname) from None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module))


# Names the tests' own code calls that numpy 2 and Python 3.10 removed (Paddle 1.8's tests ran
# on numpy 1.x and Python 3.7): given back in the child process only, so a test fails where
# spmd differs, not on its own np.product or collections.Sequence. spmd never uses them.
LEGACY_NUMPY = {"product": "prod", "cumproduct": "cumprod", "alltrue": "all", "sometrue": "any"}
LEGACY_COLLECTIONS = ("Sequence", "Mapping", "MutableMapping", "Iterable", "Callable", "Set")


def give_back_legacy_names():
    """numpy's and collections' removed names as aliases of their successors, where missing;
    returns the names it added."""
    import collections
    import collections.abc

    import numpy

    added = []
    for old, new in LEGACY_NUMPY.items():
        if not hasattr(numpy, old):
            setattr(numpy, old, getattr(numpy, new))
            added.append(f"numpy.{old}")
    for name in LEGACY_COLLECTIONS:
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
            added.append(f"collections.{name}")
    return added


def install():
    """Put the alias first on sys.meta_path (once); returns the finder."""
    for finder in sys.meta_path:
        if isinstance(finder, PaddleAlias):
            return finder
    finder = PaddleAlias()
    sys.meta_path.insert(0, finder)
    return finder


def uninstall():
    """Remove the alias and every `paddle` module it made (for the in-process unit test)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, PaddleAlias)]
    for name in [n for n in sys.modules if spmd_name(n) is not None]:
        del sys.modules[name]


def _tests_of(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _tests_of(item)
        else:
            yield item


def _innermost_frame(tb_text):
    """The last `File "...", line N` of a traceback: where the exception was raised."""
    lines = [ln.strip() for ln in tb_text.splitlines() if ln.strip().startswith('File "')]
    return lines[-1] if lines else ""


def _record(test_id, kind, exc_info):
    exc_type, exc, tb = exc_info
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    message = "".join(traceback.format_exception_only(exc_type, exc)).strip()
    return {"id": test_id, "kind": kind, "exc_type": exc_type.__name__,
            "message": message[-2000:], "where": _innermost_frame(text),
            "traceback": text[-4000:]}


class _Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []

    def addError(self, test, err):
        super().addError(test, err)
        self.records.append(_record(test.id(), "error", err))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.records.append(_record(test.id(), "failure", err))


def run_file(test_file, deselected):
    """Import and run one test file's tests, less the deselected ids; a JSON-able summary."""
    folder, base = os.path.split(os.path.abspath(test_file))
    os.chdir(folder)
    sys.path.insert(0, folder)
    summary = {"file": base, "tests": 0, "run": 0, "skipped": 0, "deselected": 0,
               "records": [], "import_error": None}
    try:
        module = importlib.import_module(base[:-3])
    except BaseException:  # noqa: B036 - a test module may raise anything, SystemExit too
        summary["import_error"] = _record(base, "import", sys.exc_info())
        return summary
    tests = list(_tests_of(unittest.defaultTestLoader.loadTestsFromModule(module)))
    summary["tests"] = len(tests)
    chosen = [t for t in tests if t.id().split(".", 1)[-1] not in deselected]
    summary["deselected"] = len(tests) - len(chosen)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=_Result)
    result = runner.run(unittest.TestSuite(chosen))
    summary["run"] = result.testsRun
    summary["skipped"] = len(result.skipped)
    summary["records"] = result.records
    return summary


def main(argv):
    test_file, result_path = argv[0], argv[1]
    summary = run_file(test_file, set(argv[2:]))
    with open(result_path, "w") as out:
        json.dump(summary, out)
    sys.stdout.flush()
    sys.stderr.flush()
    # a test may leave non-daemon threads (reader queues, servers) behind: do not wait on them
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
