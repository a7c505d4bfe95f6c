"""fluid.framework: the IR classes and default programs."""
from ..core import (  # noqa: F401
    Block,
    Operator,
    Program,
    Variable,
    default_main_program,
    default_startup_program,
    program_guard,
    switch_main_program,
    switch_startup_program,
)
from ..core.variable import Parameter  # noqa: F401

__all__ = ["Block", "Operator", "Parameter", "Program", "Variable", "default_main_program",
           "default_startup_program", "program_guard", "switch_main_program",
           "switch_startup_program"]
