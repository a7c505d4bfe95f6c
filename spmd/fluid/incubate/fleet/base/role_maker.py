"""fluid.incubate.fleet.base.role_maker: the role makers of collective and parameter-server mode
(spmd.fleet.role_maker).

>>> from spmd.fluid.incubate.fleet.base import role_maker
>>> role = role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"])
"""
from .....fleet.role_maker import (  # noqa: F401
    PaddleCloudRoleMaker,
    Role,
    RoleMakerBase,
    UserDefinedCollectiveRoleMaker,
    UserDefinedRoleMaker,
)
from .general_role_maker import GeneralRoleMaker
from .mpi_role_maker import MPIRoleMaker, MPISymetricRoleMaker  # noqa: F401

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedCollectiveRoleMaker",
           "UserDefinedRoleMaker", "GeneralRoleMaker", "MPISymetricRoleMaker"]
