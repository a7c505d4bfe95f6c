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
    host,
    index,
    linalg,
    lod_array,
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
    sequence,
    sequence_rnn,
    sparse,
    rnn,
    sync_batch_norm,
    tensor,
    vision,
)
from . import lod_rules  # noqa: F401 - after every op it names is defined
from .build import build_operator
from .registry import OP_DEFS, REQUIRED, define_op, get_op_def, grad_var_name

install_op_schema(build_operator,
                  lambda type, attrs: get_op_def(type).validate_attrs(attrs, f"op '{type}'"))

__all__ = ["OP_DEFS", "REQUIRED", "define_op", "get_op_def", "grad_var_name"]
