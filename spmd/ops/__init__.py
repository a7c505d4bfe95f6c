"""Op definitions. Importing this package registers every op in OP_DEFS."""
from ..core.operator import install_op_schema
from . import (  # noqa: F401 - registration side effects
    activation,
    batch_share,
    beam_search,
    collective,
    crf,
    ctc,
    distributed,
    fused,
    host,
    index,
    linalg,
    lod_array,
    lod_rules,
    logic,
    loss,
    manip,
    math,
    metric,
    nn,
    norm,
    optim,
    random,
    reader,
    reduce,
    rnn,
    sequence,
    sequence_rnn,
    sparse,
    sync_batch_norm,
    tensor,
    vision,
)
from .build import build_operator
from .registry import OP_DEFS, REQUIRED, define_op, get_op_def, grad_var_name

lod_rules.install()  # after every op the table names is defined
install_op_schema(build_operator,
                  lambda type, attrs: get_op_def(type).validate_attrs(attrs, f"op '{type}'"))

__all__ = ["OP_DEFS", "REQUIRED", "define_op", "get_op_def", "grad_var_name"]
