"""fluid.incubate.fleet.base.role_maker: collective role makers (spmd.fleet.role_maker).

>>> from spmd.fluid.incubate.fleet.base import role_maker
>>> role = role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"])
"""
from .....fleet.role_maker import (  # noqa: F401
    PaddleCloudRoleMaker,
    Role,
    RoleMakerBase,
    UserDefinedCollectiveRoleMaker,
)

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedCollectiveRoleMaker"]
