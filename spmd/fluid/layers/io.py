"""fluid.layers.io: fluid 1.8's module of that name (see fluid_modules), with the hand-built
parameter-server layers fluid's module holds outside its __all__ (ListenAndServ, Send,
Recv: spmd/layers/listen_and_serv.py)."""
from ...layers import listen_and_serv as _serv
from .fluid_modules import populate

__all__ = populate(globals(), "io", {n: getattr(_serv, n) for n in _serv.__all__})
