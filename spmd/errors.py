"""The exception types users see. Each message says what, where, expected vs got, and the fix."""
from __future__ import annotations


class SpmdError(Exception):
    """Base of every error spmd raises on purpose."""


class InvalidArgumentError(SpmdError, ValueError):
    """A value a user passed is wrong: a shape, a dtype, an attribute, a name."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (a list where a Variable goes, an int dtype where a float
    one goes): fluid 1.8 raises TypeError there, so both `except TypeError` and
    `except InvalidArgumentError` catch it."""


class MissingArgumentError(ArgumentTypeError, AssertionError):
    """A required argument given as None where fluid 1.8 asserts it is given (`assert x is not
    None` in paddle.tensor's builders, such as logsumexp): `except AssertionError` catches it
    as there, and `except TypeError` as for any other wrong argument."""


class NotFoundError(SpmdError, KeyError):
    """A named thing (variable, op type, kernel) does not exist."""

    def __str__(self):  # KeyError would print the repr of the message, quotes and all
        return str(self.args[0]) if self.args else ""


class FeedError(InvalidArgumentError):
    """A feed has an unknown name, a missing entry, a wrong shape or a wrong dtype."""


class UnimplementedError(SpmdError, NotImplementedError):
    """A case fluid 1.8 also refuses as not supported yet (it raises NotImplementedError there),
    such as an optimizer inside control flow trained on several places."""


class PreconditionError(SpmdError, RuntimeError):
    """Something had to happen first: a startup program run, a parameter initialized."""


class ExecutionError(SpmdError, RuntimeError):
    """An op failed while running; the message names the op and its position in the program."""


class NumericError(ExecutionError):
    """FLAGS_check_nan_inf found NaN or Inf: names the op, the variable and the rank."""


class CommunicationError(SpmdError, RuntimeError):
    """A collective failed or timed out; names the op and the ranks involved."""


class EOFException(SpmdError):
    """A non-iterable reader (DataLoader / PyReader / py_reader) has no more batches: the epoch
    ended. Catch it (as `fluid.core.EOFException`), call the reader's `reset()`, and start the
    next epoch."""
