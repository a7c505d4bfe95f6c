"""A parameter-server job's roles, read from fluid's environment variables: the one reader
of the contract that launch/env.py writes (paddle-launch --server_num, or under mpiexec / srun
the first N ranks serve) and that fluid 1.x's own launchers and PaddleCloud set:

    PADDLE_TRAINING_ROLE (or TRAINING_ROLE)   PSERVER or TRAINER
    PADDLE_PSERVERS_IP_PORT_LIST              ip:port of every pserver, in pserver order
      (or PADDLE_PSERVER_IPS with PADDLE_PORT: one port, or one per ip)
    PADDLE_TRAINERS_NUM                       the number of trainers
    PADDLE_TRAINER_ID                         a trainer's index
    PADDLE_CURRENT_ENDPOINT (or POD_IP:PADDLE_PORT)   a pserver's own endpoint

The seed's DistributeTranspiler scripts read these themselves; fleet's PaddleCloudRoleMaker
(spmd/fleet/role_maker.py) reads them through read_ps_role.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PSERVER", "TRAINER", "PS_DEFAULT_PORT", "PSRole", "pserver_endpoints",
           "read_ps_role"]

PSERVER = "PSERVER"
TRAINER = "TRAINER"
PS_DEFAULT_PORT = 6170


@dataclass(frozen=True)
class PSRole:
    """This process's part in a parameter-server job, as the PADDLE_* variables say."""

    role: str
    """PSERVER or TRAINER."""
    pserver_endpoints: tuple
    trainers_num: int
    trainer_id: int
    """A trainer's index (0 on a pserver)."""
    current_endpoint: str | None
    """A pserver's own endpoint (None on a trainer)."""

    @property
    def index(self) -> int:
        """The rank within its role: pserver i, or trainer i."""
        if self.role == PSERVER:
            return self.pserver_endpoints.index(self.current_endpoint)
        return self.trainer_id


def pserver_endpoints(env: Mapping[str, str]) -> list[str]:
    """The pservers' 'ip:port' list: PADDLE_PSERVERS_IP_PORT_LIST, else PADDLE_PSERVER_IPS
    joined with PADDLE_PORT; [] when neither is set. Raises ValueError on a port count that
    matches neither one nor every ip."""
    listed = env.get("PADDLE_PSERVERS_IP_PORT_LIST") or env.get("PADDLE_PSERVER_ENDPOINTS")
    if listed:
        return [e.strip() for e in listed.split(",") if e.strip()]
    ips = env.get("PADDLE_PSERVER_IPS") or env.get("PADDLE_PSERVERS")
    if not ips:
        return []
    ips_list = [ip.strip() for ip in ips.split(",") if ip.strip()]
    ports = [p.strip() for p in env.get("PADDLE_PORT", str(PS_DEFAULT_PORT)).split(",")]
    if len(ports) == 1:
        ports *= len(ips_list)
    if len(ports) != len(ips_list):
        raise ValueError(f"PADDLE_PSERVER_IPS lists {len(ips_list)} ip(s) but PADDLE_PORT "
                         f"{len(ports)} port(s); give one port, or one per ip, or set "
                         f"PADDLE_PSERVERS_IP_PORT_LIST=ip:port,...")
    return [f"{ip}:{port}" for ip, port in zip(ips_list, ports)]


def read_ps_role(env: Mapping[str, str] | None = None) -> PSRole | None:
    """This process's role from fluid's variables; None when PADDLE_TRAINING_ROLE (or
    TRAINING_ROLE) is unset. Raises ValueError naming the variable to fix.

    >>> r = read_ps_role({"PADDLE_TRAINING_ROLE": "PSERVER", "PADDLE_PSERVER_IPS": "10.0.0.1",
    ...                   "PADDLE_PORT": "6174", "POD_IP": "10.0.0.1", "PADDLE_TRAINERS_NUM": "2"})
    >>> r.role, r.current_endpoint, r.index
    ('PSERVER', '10.0.0.1:6174', 0)
    """
    env = os.environ if env is None else env
    role = (env.get("PADDLE_TRAINING_ROLE") or env.get("TRAINING_ROLE") or "").strip().upper()
    if not role:
        return None
    if role not in (PSERVER, TRAINER):
        raise ValueError(f"PADDLE_TRAINING_ROLE={role!r}: expected PSERVER or TRAINER")
    endpoints = pserver_endpoints(env)
    if not endpoints:
        raise ValueError("PADDLE_TRAINING_ROLE is set but no pserver is named: set "
                         "PADDLE_PSERVERS_IP_PORT_LIST=ip:port,... (or PADDLE_PSERVER_IPS and "
                         "PADDLE_PORT)")
    try:
        trainers = int(env.get("PADDLE_TRAINERS_NUM", "1"))
        trainer_id = int(env.get("PADDLE_TRAINER_ID", "0")) if role == TRAINER else 0
    except ValueError as e:
        raise ValueError(f"PADDLE_TRAINERS_NUM / PADDLE_TRAINER_ID must be integers ({e})") \
            from None
    if trainers < 1 or not 0 <= trainer_id < trainers:
        raise ValueError(f"PADDLE_TRAINER_ID={trainer_id} must be in 0..PADDLE_TRAINERS_NUM-1 "
                         f"(PADDLE_TRAINERS_NUM={trainers})")
    current = None
    if role == PSERVER:
        current = env.get("PADDLE_CURRENT_ENDPOINT")
        if not current and env.get("POD_IP") and env.get("PADDLE_PORT", "").isdigit():
            current = f"{env['POD_IP']}:{env['PADDLE_PORT']}"
        if current not in endpoints:
            raise ValueError(f"this pserver's endpoint {current!r} (PADDLE_CURRENT_ENDPOINT, or "
                             f"POD_IP:PADDLE_PORT) is not in the pservers' list "
                             f"{','.join(endpoints)}")
    return PSRole(role, tuple(endpoints), trainers, trainer_id, current)
