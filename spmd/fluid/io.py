"""fluid.io: save/load of variables, persistables and inference models (no pickle), and the
feeding names fluid.io also holds (DataLoader, PyReader, batch, shuffle, default_collate_fn)."""
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
    inner = getattr(main_program, "program", None)  # a CompiledProgram's program
    if isinstance(inner, Program):
        return inner
    if not isinstance(main_program, Program):
        raise TypeError(f"The type of input main_program is invalid, expected "
                        f"fluid.Program, but received {type(main_program)}")
    return main_program
