"""fluid.contrib.slim.graph.graph_wrapper: the views slim's strategies take of a Program.

GraphWrapper holds a Program with named in-nodes (feeds) and out-nodes (fetches, 'loss' among
them); VarWrapper and OpWrapper wrap its variables and ops, with the graph walks the pruning
strategies need (the ops reading or writing a variable, an op's neighbours), the FLOPs count
slim's pruning targets are measured in, and cloning, merging (a teacher into a student) and
saving. Note fluid's naming, kept: VarWrapper.inputs() are the ops that READ the variable and
VarWrapper.outputs() the ops that WRITE it.

>>> import spmd.fluid as fluid
>>> main, start = fluid.Program(), fluid.Program()
>>> with fluid.program_guard(main, start):
...     x = fluid.data("x", [None, 4])
...     y = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(name="fc_w"), bias_attr=False)
>>> g = GraphWrapper(main, in_nodes=[("x", "x")], out_nodes=[("y", y.name)])
>>> [p.name() for p in g.all_parameters()], g.var("fc_w").shape(), g.flops()
(['fc_w'], (4, 3), 24)
"""
from __future__ import annotations

import copy
import os
from collections import OrderedDict

import numpy as np

from .....core.operator import OpRole, OpSchema
from .....core.program import Program, program_guard
from .....core.variable import Parameter, Variable, normalize_shape
from .... import io

__all__ = ["GraphWrapper", "VarWrapper", "OpWrapper"]

# the update ops whose persistable outputs, other than the parameter, are its accumulators
# (pruned together with it); fluid 1.8's list
OPTIMIZER_OPS = ["momentum", "lars_momentum", "adagrad", "adam", "adamax", "dpsgd",
                 "decayed_adagrad", "adadelta", "rmsprop"]


class VarWrapper:
    """A variable of a GraphWrapper's program."""

    def __init__(self, var, graph):
        if not isinstance(var, Variable):
            raise TypeError(f"VarWrapper wraps a Variable, got {type(var).__name__}")
        if not isinstance(graph, GraphWrapper):
            raise TypeError(f"VarWrapper's graph must be a GraphWrapper, got "
                            f"{type(graph).__name__}")
        self._var = var
        self._graph = graph

    def __eq__(self, other):
        return isinstance(other, VarWrapper) and self._var.name == other._var.name

    def __hash__(self):
        return hash(self._var.name)

    def __repr__(self):
        return f"VarWrapper({self._var.name}{list(self._var.shape)})"

    @property
    def var(self):
        """The wrapped Variable."""
        return self._var

    def name(self):
        return self._var.name

    def shape(self):
        return self._var.shape

    def set_shape(self, shape):
        """Declare a new shape (fluid's var.desc.set_shape); the program counts it as a
        change, so plans compiled for the old shapes are rebuilt."""
        new = normalize_shape(list(shape), self._var.name)
        if tuple(new) != tuple(self._var.shape):
            self._var.shape = new
            self._var.block.program._bump()

    def inputs(self):
        """The ops that read this variable (fluid's name)."""
        return [op for op in self._graph.ops() if self._var.name in op._op.input_arg_names]

    def outputs(self):
        """The ops that write this variable (fluid's name)."""
        return [op for op in self._graph.ops() if self._var.name in op._op.output_arg_names]


class OpWrapper:
    """An op of a GraphWrapper's program; idx() is its position in its block."""

    def __init__(self, op, graph, idx=None):
        if not isinstance(graph, GraphWrapper):
            raise TypeError(f"OpWrapper's graph must be a GraphWrapper, got "
                            f"{type(graph).__name__}")
        self._op = op
        self._graph = graph
        self._idx = op.idx if idx is None else idx

    def __eq__(self, other):
        return isinstance(other, OpWrapper) and self._op is other._op

    def __hash__(self):
        return id(self._op)

    def __repr__(self):
        return f"OpWrapper({self._op.type}#{self._idx})"

    @property
    def op(self):
        """The wrapped Operator."""
        return self._op

    def all_inputs(self):
        return [self._graph.var(n) for n in self._op.input_arg_names]

    def all_outputs(self):
        return [self._graph.var(n) for n in self._op.output_arg_names]

    def idx(self):
        return self._idx

    def type(self):
        return self._op.type

    def is_bwd_op(self):
        return self._op.type.endswith("_grad")

    def is_opt_op(self):
        return self._op.type in OPTIMIZER_OPS

    def inputs(self, name):
        return [self._graph.var(n) for n in self._op.input(name)]

    def outputs(self, name):
        return [self._graph.var(n) for n in self._op.output(name)]

    def set_attr(self, key, value):
        self._op._set_attr(key, value)

    def attr(self, name):
        return self._op.attr(name)


def _shape_for_count(shape):
    """A declared shape with an unknown batch (-1 first) counted as 1, as fluid's flops."""
    shape = list(shape)
    if shape and shape[0] == -1:
        shape[0] = 1
    return shape


class GraphWrapper:
    """A Program with its in-nodes and out-nodes (lists of (key, variable name) pairs, or
    dicts): what slim's Compressor and strategies run, prune and merge."""

    def __init__(self, program=None, in_nodes=None, out_nodes=None):
        self.program = Program() if program is None else program
        self.persistables = {v.name: v for v in self.program.list_vars() if v.persistable}
        self.teacher_persistables = {}
        self.compiled_graph = None
        self.in_nodes = OrderedDict(in_nodes or [])
        self.out_nodes = OrderedDict(out_nodes or [])
        self._attrs = OrderedDict()

    # -- the program's nodes ---------------------------------------------------------------
    def all_parameters(self):
        return [VarWrapper(p, self) for b in self.program.blocks for p in b.all_parameters()]

    def is_parameter(self, var):
        return isinstance(var._var, Parameter)

    def is_persistable(self, var):
        return var._var.persistable

    def ops(self):
        return [OpWrapper(op, self, i) for b in self.program.blocks
                for i, op in enumerate(b.ops)]

    def vars(self):
        return [VarWrapper(v, self) for v in self.program.list_vars()]

    def var(self, name):
        block = self.program.global_block()
        found = block._find_var_recursive(name)
        if found is None:
            for sub in self.program.blocks[1:]:
                if sub.has_var(name):
                    found = sub.var(name)
                    break
        return VarWrapper(found if found is not None else block.var(name), self)

    def pre_ops(self, op):
        """The ops writing a variable `op` reads."""
        reads = set(op._op.input_arg_names)
        return [p for p in self.ops() if reads.intersection(p._op.output_arg_names)]

    def next_ops(self, op):
        """The ops reading a variable `op` writes."""
        writes = set(op._op.output_arg_names)
        return [p for p in self.ops() if writes.intersection(p._op.input_arg_names)]

    def get_param_by_op(self, op):
        params = [v for v in op.all_inputs() if isinstance(v._var, Parameter)]
        if not params:
            raise ValueError(f"GraphWrapper.get_param_by_op: op {op.type()} #{op.idx()} reads "
                             f"no parameter")
        return params

    def numel_params(self):
        return int(sum(int(np.prod(p.shape())) for p in self.all_parameters()))

    # -- building ----------------------------------------------------------------------------
    def compile(self, for_parallel=True, for_test=False, mem_opt=False):
        """Make compiled_graph, what SlimGraphExecutor runs: data parallel over the places
        (loss = out_nodes['loss'] unless for_test), or the plain program."""
        from .... import compiler

        if for_parallel:
            strategy = compiler.BuildStrategy()
            strategy.enable_inplace = mem_opt
            strategy.memory_optimize = mem_opt
            strategy.fuse_all_reduce_ops = False
            loss = None if for_test else self.out_nodes["loss"]
            self.compiled_graph = compiler.CompiledProgram(self.program).with_data_parallel(
                loss_name=loss, build_strategy=strategy)
        else:
            self.compiled_graph = compiler.CompiledProgram(self.program)

    def clone(self, for_test=False):
        return GraphWrapper(self.program.clone(for_test), copy.deepcopy(self.in_nodes),
                            copy.deepcopy(self.out_nodes))

    def merge(self, graph):
        """Append `graph`'s variables and ops (a teacher's) to this program. Its persistables
        become plain variables here (not parameters: the merged-in network is not trained)
        and are remembered in teacher_persistables (left out of save_persistables)."""
        block = self.program.global_block()
        for var in graph.program.list_vars():
            if var.persistable:
                self.teacher_persistables[var.name] = var
            new = block._clone_variable(var, force_persistable=False)
            new.stop_gradient = var.stop_gradient
        for op in graph.program.global_block().ops:
            block.append_op(type=op.type, inputs={k: list(v) for k, v in op.inputs.items()},
                            outputs={k: list(v) for k, v in op.outputs.items()},
                            attrs=dict(op.attrs), role=op.role)

    def get_optimize_graph(self, optimizer, place, scope, no_grad_var_names=None):
        """A clone with `optimizer`'s backward and update ops for out_nodes['loss'] (or
        'cost'); the optimizer's new state is initialized in `scope`. None without a loss."""
        from ....executor import Executor

        graph = self.clone()
        target = graph.out_nodes.get("loss", graph.out_nodes.get("cost"))
        if target is None:
            return None
        startup = Program()
        with program_guard(graph.program, startup):
            if isinstance(optimizer._learning_rate, Variable):
                optimizer._learning_rate_map[graph.program] = optimizer._learning_rate
            optimizer.minimize(graph.var(target)._var, no_grad_set=no_grad_var_names or None)
        Executor(place).run(startup, scope=scope)
        return graph

    # -- measures ----------------------------------------------------------------------------
    def flops(self, only_conv=False):
        """fluid 1.8's FLOPs count from the declared shapes: convolutions (2 * output size *
        (kernel taps per output + bias)), and unless only_conv pool2d, mul, relu, sigmoid and
        batch_norm."""
        total = 0
        for op in self.ops():
            kind = op.type()
            if kind in ("conv2d", "depthwise_conv2d"):
                c_out, c_in, k_h, k_w = op.inputs("Filter")[0].shape()
                _, _, h_out, w_out = op.outputs("Output")[0].shape()
                taps = k_h * k_w * (c_in / op.attr("groups"))
                bias = 1 if op._op.inputs.get("Bias") else 0
                total += 2 * h_out * w_out * c_out * (taps + bias)
            elif only_conv:
                continue
            elif kind == "pool2d":
                _, c_out, h_out, w_out = op.outputs("Out")[0].shape()
                total += h_out * w_out * c_out * op.attr("ksize")[0] ** 2
            elif kind == "mul":
                x_shape = _shape_for_count(op.inputs("X")[0].shape())
                total += 2 * x_shape[0] * x_shape[1] * op.inputs("Y")[0].shape()[1]
            elif kind in ("relu", "sigmoid", "batch_norm"):
                total += int(np.prod(_shape_for_count(op.inputs("X")[0].shape())))
        return total

    # -- shapes after pruning ----------------------------------------------------------------
    def update_param_shape(self, scope):
        """Declare each parameter with the shape its tensor in `scope` has (after loading
        pruned parameters)."""
        for param in self.all_parameters():
            param.set_shape(np.asarray(scope.find_var(param.name()).get_tensor()).shape)

    def infer_shape(self):
        """Infer every op's output shapes again from its inputs' (after parameters changed
        shape). Control-flow ops, whose bodies are inferred when built, are left alone."""
        for block in self.program.blocks:
            for i, op in enumerate(block.ops):
                if any(k.endswith("block") for k in op.attrs) or op.role is not OpRole.FORWARD:
                    continue
                OpSchema.build(block, op.type, op.inputs, op.outputs, op.attrs, op.role, i)

    def update_groups_of_conv(self):
        """A depthwise convolution's groups follow its filter count."""
        for op in self.ops():
            if op.type() in ("depthwise_conv2d", "depthwise_conv2d_grad"):
                op.set_attr("groups", op.inputs("Filter")[0].shape()[0])

    # -- saving ------------------------------------------------------------------------------
    def save_model(self, path, exe):
        """An inference model of in_nodes -> out_nodes (__model__ and __params__)."""
        outs = [self.var(n)._var for n in self.out_nodes.values()]
        ins = list(self.in_nodes.values())
        if not ins or not outs:
            raise ValueError("GraphWrapper.save_model needs in_nodes and out_nodes")
        io.save_inference_model(path, ins, outs, exe.exe, model_filename="__model__",
                                params_filename="__params__",
                                main_program=self.program.clone(),
                                export_for_deployment=True)

    def save_infer_model(self, path, exe, in_out, program_only=False):
        """An inference model of in_out[0] (feed names) -> in_out[1] (fetch names)."""
        outs = [self.var(n)._var for n in in_out[1]]
        ins = list(in_out[0])
        if not ins or not outs:
            raise ValueError("GraphWrapper.save_infer_model needs inputs and outputs")
        io.save_inference_model(path, ins, outs, exe.exe, model_filename="__model__.infer",
                                params_filename="__params__", program_only=program_only,
                                main_program=self.program.clone(),
                                export_for_deployment=True)

    def _own_persistables(self):
        for var in self.program.list_vars():  # the optimizer's state, added since __init__
            if var.persistable and var.name not in self.persistables:
                self.persistables[var.name] = var
        names = [n for n in self.persistables if "reader" not in n and "double_buffer" not in n]
        return [self.persistables[n] for n in names]

    def save_persistables(self, path, exe):
        """The persistables (a merged-in teacher's left out) under `path`, from the global
        scope (use scope_guard)."""
        own = [v for v in self._own_persistables() if v.name not in self.teacher_persistables]
        io.save_vars(exe.exe, path, main_program=self.program, vars=own)

    def load_persistables(self, path, exe):
        """Load those of the persistables that `path` holds (the optimizer's state too,
        which fluid 1.8 leaves out: a resumed run continues as the uninterrupted one)."""
        present = [v for v in self._own_persistables()
                   if os.path.exists(os.path.join(path, v.name))
                   or os.path.exists(os.path.join(path, v.name + ".npy"))]
        if present:
            io.load_vars(exe.exe, path, main_program=self.program, vars=present)
