"""fluid.unique_name as a module (`from paddle.fluid import unique_name`,
`import paddle.fluid.unique_name`): generate, guard, switch over spmd's one name generator.

>>> import spmd.fluid.unique_name as unique_name
>>> with unique_name.guard():
...     unique_name.generate("fc")
'fc_0'
"""
from ..core.unique_name import UniqueNameGenerator, generate, guard, switch

__all__ = ["UniqueNameGenerator", "generate", "guard", "switch"]

# fluid keeps a second generator for names a program's structure may ignore (dygraph's
# parameter names); spmd names everything with one
generate_with_ignorable_key = generate
