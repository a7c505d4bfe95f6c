"""fluid.io: save/load of variables, persistables and inference models (no pickle), and the
feeding names fluid.io also holds (DataLoader, PyReader, batch, shuffle, default_collate_fn)."""
from ..errors import InvalidArgumentError
from ..io import *  # noqa: F401,F403
from ..reader.batch import batch  # noqa: F401
from ..reader.collate import default_collate_fn  # noqa: F401
from ..reader.decorator import (  # noqa: F401 - fluid.io holds the reader decorators too
    ComposeNotAligned,
    buffered,
    cache,
    chain,
    compose,
    firstn,
    map_readers,
    shuffle,
    xmap_readers,
)
from ..reader.loader import DataLoader, PyReader  # noqa: F401
from ..reader.multiprocess import multiprocess_reader  # noqa: F401


def _get_valid_program(main_program=None):
    """`main_program` (the default main program when None); a CompiledProgram gives the
    program it compiles, anything else is a TypeError."""
    from ..core.program import Program, default_main_program

    if main_program is None:
        return default_main_program()
    if getattr(main_program, "graph", None) is not None:  # CompiledProgram(core.Graph(...))
        raise TypeError("The type of input main_program is invalid, expected type is Program, "
                        "but received None: a CompiledProgram built from a core.Graph holds "
                        "no program (pass the Program itself)")
    inner = getattr(main_program, "program", None)  # a CompiledProgram's program
    if isinstance(inner, Program):
        return inner
    if not isinstance(main_program, Program):
        raise TypeError(f"The type of input main_program is invalid, expected "
                        f"fluid.Program, but received {type(main_program)}")
    return main_program


class NotAParameterError(InvalidArgumentError, AssertionError):
    """get_parameter_value given a variable that is not a Parameter; an AssertionError too,
    the type fluid 1.8 raises there."""


def get_parameter_value(para, executor):
    """The value of parameter `para` in the executor's scope, as a numpy array (fluid 1.8:
    a program of its own that only fetches it, so nothing else runs).

    >>> # w = fluid.io.get_parameter_value(main.global_block().var("fc_0.w_0"), exe)
    """
    from ..core.program import Program
    from ..io import is_parameter

    if not is_parameter(para):
        raise NotAParameterError(
            f"get_parameter_value: {getattr(para, 'name', para)!r} is not a Parameter; "
            f"read other variables with fluid.global_scope().find_var(name).get_tensor()")
    fetch_only = Program()
    var = fetch_only.global_block()._clone_variable(para)
    return executor.run(fetch_only, feed={}, fetch_list=[var])[0]


def get_parameter_value_by_name(name, executor, program=None):
    """The value of the parameter called `name` of `program` (the default main program when
    None) in the executor's scope, as a numpy array.

    >>> # w = fluid.io.get_parameter_value_by_name("fc_0.w_0", exe)
    """
    program = _get_valid_program(program)
    return get_parameter_value(program.global_block().var(name), executor)
