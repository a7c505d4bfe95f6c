"""fluid.layers.control_flow: fluid 1.8's module of that name (see fluid_modules), with the LoD
tensor-array layers fluid 1.8 has only there (lod_rank_table, max_sequence_len,
lod_tensor_to_array, array_to_lod_tensor, shrink_memory)."""
from ...layers import dynamic_rnn as _dynamic_rnn
from .fluid_modules import populate

__all__ = populate(globals(), "control_flow",
                   {n: getattr(_dynamic_rnn, n) for n in _dynamic_rnn.CONTROL_FLOW_ONLY})
