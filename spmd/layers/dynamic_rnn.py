"""fluid.layers.DynamicRNN and the LoD tensor-array layers it is built on (fluid 1.8 has them in
fluid.layers.control_flow: lod_rank_table, max_sequence_len, lod_tensor_to_array,
array_to_lod_tensor, shrink_memory; reorder_lod_tensor_by_rank is also in fluid.layers).

A DynamicRNN is what fluid 1.8 builds: the step input's sequences sorted longest first (a
lod_rank_table), split by time step into a tensor array, and a While loop whose body reads
step t of every sequence still running; memories live in arrays and are shrunk each step to
the sequences still running; the outputs are arrays put back into a LoD tensor in the input's
order. The body runs in the compiled plan; a step's values are freed when it ends (kept only
as the loop state the backward pass recomputes from).

>>> import spmd.fluid as fluid
>>> with fluid.program_guard(fluid.Program(), fluid.Program()):
...     x = fluid.data("x", [None, 4], "float32", lod_level=1)
...     rnn = fluid.layers.DynamicRNN()
...     with rnn.block():
...         word = rnn.step_input(x)
...         prev = rnn.memory(shape=[8], value=0.0)
...         hidden = fluid.layers.fc([word, prev], size=8, act="tanh")
...         rnn.update_memory(prev, hidden)
...         rnn.output(hidden)
...     out = rnn()   # LoD like x, 8 features
"""
from __future__ import annotations

import contextlib

from ..core.unique_name import generate
from ..core.variable import Variable
from ..errors import InvalidArgumentError
from ..ops import lod_array as _ops  # noqa: F401 - defines the ops these layers append
from .branches import (  # noqa: F401 - fluid.layers.control_flow's (CONTROL_FLOW_ONLY)
    ConditionalBlock,
    merge_lod_tensor,
    select_input,
    select_output,
    split_lod_tensor,
)
from .helper import LayerHelper
from .logic import less_than
from .loops import While
from .math_ops import increment
from .sub_block import ControlFlowTypeError, _check_var, reads_fed_lod
from .tensor import fill_constant
from .tensor_array import array_read, array_write

__all__ = ["DynamicRNN", "reorder_lod_tensor_by_rank"]
# fluid.layers.control_flow only (fluid 1.8 leaves them out of fluid.layers)
CONTROL_FLOW_ONLY = ["array_to_lod_tensor", "lod_rank_table", "lod_tensor_to_array",
                     "max_sequence_len", "shrink_memory",
                     # branches.py's, given here so fluid.layers.control_flow lists them
                     "ConditionalBlock", "merge_lod_tensor", "select_input", "select_output",
                     "split_lod_tensor"]

RANK_TABLE, ARRAY = "LOD_RANK_TABLE", "LOD_TENSOR_ARRAY"


def _check_table(table, where: str):
    if isinstance(table, (list, tuple)) and len(table) == 1:
        table = table[0]
    if not isinstance(table, Variable) or table.type != RANK_TABLE:
        raise ControlFlowTypeError(
            f"{where}: the rank table must be a LOD_RANK_TABLE Variable (from "
            f"fluid.layers.control_flow.lod_rank_table(x)), got "
            f"{getattr(table, 'type', type(table).__name__)}")
    return table


def _one(x, what: str, where: str):
    if isinstance(x, (list, tuple)) and len(x) == 1:
        x = x[0]
    return _check_var(x, what, where)


def lod_rank_table(x, level=0):
    """The sequences of LoD level `level` of `x` as (index, length) items, longest first.

    >>> # table = fluid.layers.control_flow.lod_rank_table(x)   # x: a LoD tensor
    """
    x = _one(x, "x", "lod_rank_table")
    if not isinstance(level, int) or isinstance(level, bool) or level < 0:
        raise InvalidArgumentError(f"lod_rank_table: level must be an int >= 0, got {level!r}")
    reads_fed_lod(x, level + 1)
    helper = LayerHelper("lod_rank_table")
    table = helper.create_variable(generate("lod_rank_table"), dtype="int64", type=RANK_TABLE,
                                   stop_gradient=True)
    helper.append_op("lod_rank_table", {"X": [x]}, {"Out": [table]}, {"level": int(level)})
    return table


def _table_level(table) -> int:
    """The LoD level the rank table was made at (its lod_rank_table op's attribute)."""
    for op in table.block.ops:
        if op.type == "lod_rank_table" and table.name in op.output_arg_names:
            return int(op.attr("level"))
    return 0


def max_sequence_len(rank_table):
    """The longest sequence's length, an int64 [1] Variable.

    >>> # n = fluid.layers.control_flow.max_sequence_len(table)
    """
    table = _check_table(rank_table, "max_sequence_len")
    helper = LayerHelper("max_seqence_len")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("max_sequence_len", {"RankTable": [table]}, {"Out": [out]})
    return out


def lod_tensor_to_array(x, table):
    """A tensor array whose element t holds step t of every sequence longer than t, in the
    table's order.

    >>> # arr = fluid.layers.control_flow.lod_tensor_to_array(x, table)
    """
    x = _one(x, "x", "lod_tensor_to_array")
    table = _check_table(table, "lod_tensor_to_array")
    reads_fed_lod(x, _table_level(table) + 1)
    helper = LayerHelper("lod_tensor_to_array")
    array = helper.create_variable(generate("lod_tensor_to_array"), dtype=x.dtype, type=ARRAY)
    helper.append_op("lod_tensor_to_array", {"X": [x], "RankTable": [table]},
                     {"Out": [array]})
    if x.is_data:
        # the array's lod_level is fluid's, x's - 1; a fed x may carry more levels than it
        # declares (fluid reads the feed's LoD), and then its elements have LoD too: keep the
        # array's LoD tracked so that array_to_lod_tensor gives x back whole
        array.lod_level = max(array.lod_level, 1)
    return array


def array_to_lod_tensor(x, table):
    """The inverse of lod_tensor_to_array: the array's steps put back into sequences, in the
    order of the table's input.

    >>> # y = fluid.layers.control_flow.array_to_lod_tensor(arr, table)
    """
    # fluid 1.8.5 checks only that x is a Variable here (its test builds it on a LoD tensor);
    # the op's run time says when x is not an array
    x = _one(x, "x", "array_to_lod_tensor")
    table = _check_table(table, "array_to_lod_tensor")
    helper = LayerHelper("array_to_lod_tensor")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("array_to_lod_tensor", {"X": [x], "RankTable": [table]}, {"Out": [out]})
    return out


def shrink_memory(x, i, table):
    """The first rows of `x`, one per sequence still running at step `i` (int64 [1]); for a
    LoD `x`, its first sequences.

    >>> # mem = fluid.layers.control_flow.shrink_memory(mem, step_idx, table)
    """
    x = _check_var(x, "x", "shrink_memory")
    _check_var(i, "i", "shrink_memory", {"int64"})
    table = _check_table(table, "shrink_memory")
    helper = LayerHelper("shrink_memory")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("shrink_rnn_memory", {"X": [x], "I": [i], "RankTable": [table]},
                     {"Out": [out]})
    return out


def reorder_lod_tensor_by_rank(x, rank_table):
    """`x`'s sequences (its rows, without LoD) in the rank table's order.

    >>> # y = fluid.layers.reorder_lod_tensor_by_rank(x, table)
    """
    _check_var(x, "x", "reorder_lod_tensor_by_rank")
    reads_fed_lod(x, 1)  # a fed x's sequences are reordered when the feed has LoD, as fluid
    if not isinstance(rank_table, Variable):
        raise ControlFlowTypeError("reorder_lod_tensor_by_rank: rank_table must be a Variable")
    if rank_table.type != RANK_TABLE:
        raise ControlFlowTypeError("The type of rank_table should be LOD_RANK_TABLE.")
    helper = LayerHelper("reorder_lod_tensor_by_rank")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("reorder_lod_tensor_by_rank", {"X": [x], "RankTable": [rank_table]},
                     {"Out": [out]})
    return out


class DynamicRNN:
    """A recurrent network over the sequences of LoD tensors (see the module doc); fluid
    1.8's methods: block, step_input, static_input, memory, update_memory, output, and
    calling the object for the outputs."""

    BEFORE_RNN, IN_RNN, AFTER_RNN = 0, 1, 2

    def __init__(self, name=None):
        self.helper = LayerHelper("dynamic_rnn", name=name)
        self.status = DynamicRNN.BEFORE_RNN
        self.lod_rank_table = None
        self.max_seq_len = None
        self.step_idx = None
        self.zero_idx = None
        self.mem_dict: dict = {}
        self.output_array: list = []
        self.outputs: list = []
        self.cond = self.helper.create_variable_for_type_inference("bool")
        self.cond.stop_gradient = False
        self.while_op = While(self.cond)
        self.input_array: list = []
        self.mem_link: list = []

    def _parent_block_(self):
        block = self.helper.main_program.current_block()
        if block.parent_block is None:
            raise InvalidArgumentError("DynamicRNN: not inside rnn.block()")
        return block.parent_block

    def _assert_in_rnn_block_(self, method: str):
        if self.status != DynamicRNN.IN_RNN:
            raise InvalidArgumentError(
                f"DynamicRNN.{method} can only be invoked inside rnn.block() (`with "
                f"rnn.block():`)")

    def step_input(self, x, level=0):
        """Step t of every sequence of `x` (a LoD tensor) still running at step t; the first
        step input decides the order (longest first) and the number of steps."""
        self._assert_in_rnn_block_("step_input")
        if not isinstance(x, Variable):
            raise ControlFlowTypeError("step_input() can only take a Variable as its input.")
        if x.lod_level < 1:
            raise InvalidArgumentError(
                f"DynamicRNN.step_input: x '{x.name}' has lod_level 0; a DynamicRNN steps "
                f"through the sequences of a LoD tensor (declare it with lod_level=1 and feed "
                f"a LoDTensor), or use StaticRNN for a dense [time, batch, ...] tensor")
        if not 0 <= level < x.lod_level:
            raise InvalidArgumentError(
                f"DynamicRNN.step_input: level {level} is out of range for x '{x.name}' with "
                f"lod_level {x.lod_level}")
        parent = self._parent_block_()
        if self.lod_rank_table is None:
            self.lod_rank_table = parent.create_var(
                name=generate("lod_rank_table"), type=RANK_TABLE, dtype="int64",
                stop_gradient=True)
            parent.append_op("lod_rank_table", {"X": [x]}, {"Out": [self.lod_rank_table]},
                             {"level": int(level)})
            self.max_seq_len = parent.create_var(name=generate("dynamic_rnn_max_seq_len"),
                                                 dtype="int64", stop_gradient=True)
            parent.append_op("max_sequence_len", {"RankTable": [self.lod_rank_table]},
                             {"Out": [self.max_seq_len]})
            self.cond.stop_gradient = True
            parent.append_op("less_than", {"X": [self.step_idx], "Y": [self.max_seq_len]},
                             {"Out": [self.cond]}, {"force_cpu": True})
        input_array = parent.create_var(name=generate("dynamic_rnn_input_array"), type=ARRAY,
                                        dtype=x.dtype)
        self.input_array.append((input_array, x.dtype))
        parent.append_op("lod_tensor_to_array", {"X": [x], "RankTable": [self.lod_rank_table]},
                         {"Out": [input_array]})
        return array_read(array=input_array, i=self.step_idx)

    def static_input(self, x):
        """`x` (one sequence, or one row, per sequence of the step input) in the step
        input's order, shrunk each step to the sequences still running."""
        self._assert_in_rnn_block_("static_input")
        if not isinstance(x, Variable):
            raise ControlFlowTypeError("static_input() can only take a Variable as its input")
        if self.lod_rank_table is None:
            raise InvalidArgumentError("static_input() must be called after step_input().")
        parent = self._parent_block_()
        x_reordered = parent.create_var(name=generate("dynamic_rnn_static_input_reordered"),
                                        dtype=x.dtype)
        parent.append_op("reorder_lod_tensor_by_rank",
                         {"X": [x], "RankTable": [self.lod_rank_table]},
                         {"Out": [x_reordered]})
        return shrink_memory(x_reordered, self.step_idx, self.lod_rank_table)

    @contextlib.contextmanager
    def block(self):
        """`with rnn.block():` the ops of one step."""
        if self.status != DynamicRNN.BEFORE_RNN:
            raise InvalidArgumentError("rnn.block() can only be invoke once")
        self.step_idx = fill_constant(shape=[1], dtype="int64", value=0, force_cpu=True)
        self.step_idx.stop_gradient = False
        self.status = DynamicRNN.IN_RNN
        with self.while_op.block():
            yield
            if self.lod_rank_table is None:
                raise InvalidArgumentError(
                    "DynamicRNN: the block has no step input; call rnn.step_input(x) in it")
            increment(x=self.step_idx, value=1.0, in_place=True)
            for new_mem, mem_array in self.mem_link:
                array_write(x=new_mem, i=self.step_idx, array=mem_array)
            less_than(x=self.step_idx, y=self.max_seq_len, force_cpu=True, cond=self.cond)
        self.status = DynamicRNN.AFTER_RNN
        for array in self.output_array:
            self.outputs.append(array_to_lod_tensor(x=array, table=self.lod_rank_table))

    def __call__(self, *args, **kwargs):
        if self.status != DynamicRNN.AFTER_RNN:
            raise InvalidArgumentError(
                "Output of the dynamic RNN can only be visited outside the rnn block.")
        if not self.outputs:
            raise InvalidArgumentError("DynamicRNN has no output: call rnn.output(...) in "
                                       "rnn.block()")
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def memory(self, init=None, shape=None, value=0.0, need_reorder=False, dtype="float32"):
        """A memory: `init` (one row per sequence, in the table's order unless need_reorder),
        or `value` in `shape` (without the batch dim); shrunk to the running sequences."""
        self._assert_in_rnn_block_("memory")
        self._init_zero_idx_()
        parent = self._parent_block_()
        if init is not None:
            if not isinstance(init, Variable):
                raise ControlFlowTypeError(
                    "The input arg `init` of memory() must be a Variable")
            init_tensor = init
            if need_reorder:
                if self.lod_rank_table is None:
                    raise InvalidArgumentError(
                        "If set need_reorder to True, make sure step_input be invoked before "
                        "memory(init=init, need_reordered=True, ...).")
                init_tensor = parent.create_var(
                    name=generate("dynamic_rnn_mem_init_reordered"), dtype=init.dtype)
                parent.append_op("reorder_lod_tensor_by_rank",
                                 {"X": [init], "RankTable": [self.lod_rank_table]},
                                 {"Out": [init_tensor]})
            mem_array = parent.create_var(name=generate("dynamic_rnn_mem_array"), type=ARRAY,
                                          dtype=init.dtype)
            parent.append_op("write_to_array", {"X": [init_tensor], "I": [self.zero_idx]},
                             {"Out": [mem_array]})
            retv = array_read(array=mem_array, i=self.step_idx)
            retv = shrink_memory(x=retv, i=self.step_idx, table=self.lod_rank_table)
            self.mem_dict[retv.name] = mem_array
            return retv
        if not self.input_array:
            raise InvalidArgumentError(
                "step_input should be invoked before memory(shape=..., value=...)")
        if shape is None:
            raise InvalidArgumentError("DynamicRNN.memory: give init, or shape (and value)")
        init = parent.create_var(name=generate("mem_init"), dtype=dtype)
        arr, in_dtype = self.input_array[0]
        in0 = parent.create_var(name=generate("in0"), dtype=in_dtype)
        parent.append_op("read_from_array", {"X": [arr], "I": [self.zero_idx]},
                         {"Out": [in0]})
        parent.append_op("fill_constant_batch_size_like", {"Input": [in0]}, {"Out": [init]},
                         {"shape": [-1] + list(shape), "value": float(value),
                          "dtype": init.dtype})
        return self.memory(init=init)

    def update_memory(self, ex_mem, new_mem):
        """The memory `ex_mem` takes `new_mem`'s value at the next step."""
        self._assert_in_rnn_block_("update_memory")
        if not isinstance(ex_mem, Variable):
            raise ControlFlowTypeError(
                "The input arg `ex_mem` of update_memory() must be a Variable")
        if not isinstance(new_mem, Variable):
            raise ControlFlowTypeError(
                "The input arg `new_mem` of update_memory() must be a Variable")
        mem_array = self.mem_dict.get(ex_mem.name)
        if mem_array is None:
            raise InvalidArgumentError("Please invoke memory before update_memory")
        if self.lod_rank_table is None:
            raise InvalidArgumentError("Please invoke step_input before update_memory")
        self.mem_link.append((new_mem, mem_array))

    def output(self, *outputs):
        """Collect each of `outputs` at every step; rnn() returns them as LoD tensors."""
        self._assert_in_rnn_block_("output")
        parent = self._parent_block_()
        for each in outputs:
            _check_var(each, "each output", "DynamicRNN.output")
            array = parent.create_var(
                name=generate("_".join([self.helper.name, "output_array", each.name])),
                type=ARRAY, dtype=each.dtype)
            # made empty before the loop, which then reads and extends it
            parent.append_op("create_array", {}, {"Out": [array]}, {"dtype": each.dtype})
            array_write(x=each, i=self.step_idx, array=array)
            self.output_array.append(array)

    def _init_zero_idx_(self):
        if self.zero_idx is None:
            parent = self._parent_block_()
            self.zero_idx = parent.create_var(name=generate("zero_idx"), dtype="int64",
                                              stop_gradient=True)
            parent.append_op("fill_constant", {}, {"Out": [self.zero_idx]},
                             {"shape": [1], "dtype": "int64", "value": 0.0,
                              "force_cpu": True})
