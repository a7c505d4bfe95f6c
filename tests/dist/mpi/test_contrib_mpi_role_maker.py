"""fluid.incubate.fleet.base.role_maker.MPISymetricRoleMaker under mpiexec (any rank count):
even ranks are servers and odd ranks workers, index rank // 2; every rank derives the same
server endpoints; all_gather (JSON over MPI buffers) gives every rank's value in rank order;
workers reduce and FleetUtil sums their AUC buckets among themselves only."""
from __future__ import annotations

import numpy as np
import pytest

from spmd.comm.mpi import world
from spmd.fluid.incubate.fleet.base.role_maker import MPISymetricRoleMaker, Role

pytestmark = pytest.mark.mpi(min_size=1)


@pytest.fixture(scope="module")
def role():
    r = MPISymetricRoleMaker()
    r.generate_role()
    return r


def test_roles_follow_the_rank(role):
    rank, size = world().Get_rank(), world().Get_size()
    assert role.is_server() == (rank % 2 == 0) and role.is_worker() == (rank % 2 == 1)
    assert role._role == (Role.SERVER if rank % 2 == 0 else Role.WORKER)
    assert role.worker_index() == rank // 2 and role.server_index() == rank // 2
    assert role.worker_num() == size // 2
    assert role.is_first_worker() == (rank == 1)
    assert len(role.get_pserver_endpoints()) == (size + 1) // 2
    assert len(role.get_trainer_endpoints()) == size // 2


def test_every_rank_derives_the_same_endpoints(role):
    mine = ",".join(role.get_pserver_endpoints())
    everyone = role.all_gather(mine)
    assert everyone == [mine] * world().Get_size()
    port = int(mine.split(",")[0].rsplit(":", 1)[1])
    assert 60001 <= port <= 64000


def test_all_gather_is_in_rank_order(role):
    rank = world().Get_rank()
    got = role.all_gather({"rank": rank, "name": f"r{rank}"})
    assert got == [{"rank": r, "name": f"r{r}"} for r in range(world().Get_size())]


def test_workers_reduce_among_themselves(role):
    rank, size = world().Get_rank(), world().Get_size()
    local = np.array([rank, 1.0, -rank], "float64")
    out = np.zeros(3)
    role.all_reduce_worker(local, out)
    if role.is_worker():
        workers = [r for r in range(size) if r % 2 == 1]
        np.testing.assert_allclose(out, [sum(workers), len(workers), -sum(workers)])
        role.all_reduce_worker(local, out, mode="max")
        np.testing.assert_allclose(out, [max(workers), 1.0, -min(workers)])
    else:
        assert not out.any(), "a server is not part of the workers' reduction"
    role.barrier_all()


def test_fleet_util_sums_auc_buckets_over_the_workers(role, monkeypatch):
    import spmd.fluid as fluid
    from spmd.fluid.incubate.fleet.utils import fleet_util

    class _Fleet:
        _role_maker = role

        @staticmethod
        def worker_index():
            return role.worker_index()

        @staticmethod
        def worker_num():
            return role.worker_num()

    monkeypatch.setattr(fleet_util, "fleet", _Fleet)
    rank, size = world().Get_rank(), world().Get_size()
    if not role.is_worker():
        role.barrier_all()
        return
    pos = np.array([[0, 1, 2, 3]], "int64") * (rank + 1)
    neg = np.array([[3, 2, 1, 0]], "int64")
    with fluid.scope_guard(fluid.core.Scope()):
        fluid.global_scope().var("p").get_tensor().set(pos, fluid.CPUPlace())
        fluid.global_scope().var("n").get_tensor().set(neg, fluid.CPUPlace())
        got = fleet_util.FleetUtil("transpiler").get_global_auc(fluid.global_scope(), "p", "n")
    workers = [r for r in range(size) if r % 2 == 1]
    gpos = np.array([0, 1, 2, 3]) * sum(r + 1 for r in workers)
    gneg = np.array([3, 2, 1, 0]) * len(workers)
    area = tp = fp = 0.0
    for i in (3, 2, 1, 0):
        area += gneg[i] * (2 * tp + gpos[i]) / 2
        tp, fp = tp + gpos[i], fp + gneg[i]
    assert got == pytest.approx(area / (tp * fp))
    role.barrier_all()
