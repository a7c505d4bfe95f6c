"""fluid.annotations: deprecated(since, instead, extra_message), the decorator that prints
fluid's deprecation message on stderr at each call.

>>> @deprecated("1.6", "new_api")
... def old_api():
...     "Old."
...     return 1
>>> old_api.__doc__.splitlines()[-1].strip()
'API old_api is deprecated since 1.6. Please use new_api instead.'
"""
from __future__ import annotations

import functools
import sys

__all__ = ["deprecated"]


def deprecated(since: str, instead: str, extra_message: str = ""):
    def decorator(func):
        message = f"API {func.__name__} is deprecated since {since}. Please use {instead} instead."
        if extra_message:
            message += "\n" + extra_message

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            print(message, file=sys.stderr)
            return func(*args, **kwargs)

        wrapper.__doc__ = (wrapper.__doc__ or "") + "\n    " + message
        return wrapper

    return decorator
