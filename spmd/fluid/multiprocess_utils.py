"""fluid.multiprocess_utils: CleanupFuncRegistrar, which runs registered clean-up functions
once at interpreter exit (and on SIGTERM), as fluid's multiprocess readers use it.

>>> CleanupFuncRegistrar.register(lambda: None)
"""
from __future__ import annotations

import atexit
import signal
import sys

__all__ = ["CleanupFuncRegistrar"]


class CleanupFuncRegistrar:
    _registered: set[int] = set()
    _functions: list = []
    _signals_hooked = False

    @classmethod
    def register(cls, function, signals=(signal.SIGTERM,)) -> None:
        """Call `function` once at exit, or when one of `signals` arrives."""
        if not callable(function):
            raise TypeError("CleanupFuncRegistrar.register: function must be callable")
        if id(function) in cls._registered:
            return
        cls._registered.add(id(function))
        cls._functions.append(function)
        atexit.register(cls._run_once, function)
        if not cls._signals_hooked:
            for sig in signals:
                try:
                    previous = signal.getsignal(sig)
                    signal.signal(sig, cls._on_signal(previous))
                except ValueError:  # not the main thread: atexit still runs them
                    break
            cls._signals_hooked = True

    @classmethod
    def _run_once(cls, function) -> None:
        if function in cls._functions:
            cls._functions.remove(function)
            function()

    @classmethod
    def _on_signal(cls, previous):
        def handler(signum, frame):
            for function in list(cls._functions):
                cls._run_once(function)
            if callable(previous):
                previous(signum, frame)
            else:
                sys.exit(128 + signum)

        return handler
