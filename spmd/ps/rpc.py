"""The parameter server's gRPC transport: PServer (bound to one endpoint, serving a handler)
and PServerClient (one trainer's connection to one pserver). No generated protobuf code and
no pickle: every request and every reply is one spmd.ps.wire frame, sent as raw bytes.

RPC surface: service ``spmd.ps.PServer``, unary-unary methods, request frame meta (every
request also carries ``trainer_id``, checked against [0, trainers)) and values::

    send_variables     meta {step, then_barrier?}              values: the gradients
                                                                         reply: empty
    get_variables      meta {names, min_step, then_fetch_barrier?}
                                                  values: none               reply: the values
    prefetch           meta {table}               values: {"ids": int 1-D}   reply: {table: rows}
    barrier            meta {kind, step}          values: none               reply: empty
    checkpoint_notify  meta {dirname}             values: none               reply: empty
    complete           meta {}                    values: none               reply: empty

``kind`` is "send" or "fetch" (fluid's send and fetch barriers); ``min_step`` may be null.
The optional fields fold a barrier into the call before or after it, saving a round trip per
pserver: ``then_barrier`` true makes send_variables also wait at the send barrier of its step;
``then_fetch_barrier`` (a fetch step, or null) makes get_variables wait at that fetch barrier
after reading the values (what fluid's recv ops and the fetch_barrier after them do).
A request the server cannot accept (malformed frame, unknown field, trainer id out of range,
unknown variable, wrong size) is logged on the server (logger "spmd.ps.rpc") and answered with
an error status to that caller only: INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND,
FAILED_PRECONDITION, DEADLINE_EXCEEDED for a wait that timed out, INTERNAL for a handler bug.

Deadlines: every call has one (`deadline`, default SPMD_PS_RPC_DEADLINE, 180 s) covering its
retries and its waits; waiting handler methods get the caller's remaining time less a margin,
so a barrier that times out says which trainers are missing. While a client has never reached
its pserver, UNAVAILABLE (nothing listening yet) is retried with exponential backoff within
the deadline (and at most `max_retries` times); once it has, a lost pserver fails the call at
once, so a trainer never waits on a dead pserver.

Only this job's trainers get in: with a job token (SPMD_JOB_TOKEN, which paddle-launch gives
every process of a job; `token=` to override) every call carries the token's hello
(spmd.job_token, purpose "pserver") in its metadata, and the server checks it before the
request is decoded: a call without it, or with another job's, is logged and answered
PERMISSION_DENIED. Without a token the server admits any caller, as before.
"""
from __future__ import annotations

import hmac
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..core.selected_rows import SelectedRows
from ..errors import CommunicationError, InvalidArgumentError, NotFoundError, PreconditionError
from ..flags import flags
from ..job_token import hello, job_token
from .handler import BARRIER_KINDS, PServerHandler
from .wire import MAX_FRAME_BYTES, WireError, decode_frame, encode_frame

__all__ = ["SERVICE", "PServer", "PServerClient", "PServerUnavailable", "RequestRejected",
           "RpcError", "RpcTimeout", "parse_endpoint"]

log = logging.getLogger(__name__)
SERVICE = "spmd.ps.PServer"
_INT, _STR = "int", "str"
_CALLS = {  # call -> {meta field: type}; "values" says which values the request may carry
    "send_variables": {"step": _INT, "then_barrier": "bool?"},
    "get_variables": {"names": "names", "min_step": "int?", "then_fetch_barrier": "int?"},
    "prefetch": {"table": _STR},
    "barrier": {"kind": "kind", "step": _INT},
    "checkpoint_notify": {"dirname": _STR},
    "complete": {},
}
_EXPECT = {"int": "an integer", "int?": "an integer or null", "str": "a non-empty string",
           "kind": f"one of {list(BARRIER_KINDS)}", "names": "a list of distinct names",
          "bool?": "true, false or absent"}
_MAX_DETAILS = 2000
_TOKEN_KEY = "spmd-job"  # the gRPC metadata key of the job-token hello


def _token_hello(token: str | None) -> str | None:
    return hello(token, "pserver").decode("ascii").strip() if token else None


class RpcError(CommunicationError):
    """A pserver call failed; `endpoint`, `call`, `trainer_id` and `code` say which and how."""

    def __init__(self, message, *, endpoint, call, trainer_id, code):
        super().__init__(message)
        self.endpoint, self.call, self.trainer_id, self.code = endpoint, call, trainer_id, code


class RequestRejected(RpcError):
    """The pserver refused the request (its reason is in the message)."""


class RpcTimeout(RpcError):
    """No answer within the call's deadline."""


class PServerUnavailable(RpcError):
    """Nothing answers at the endpoint: not started (after the retries) or gone."""


def parse_endpoint(endpoint) -> tuple[str, int]:
    """("host", port) of "host:port" ("[::1]:6174" for IPv6), or InvalidArgumentError."""
    host, _, port = str(endpoint).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise InvalidArgumentError(
            f"pserver endpoint {endpoint!r} is not host:port (e.g. 127.0.0.1:6174); check "
            f"PADDLE_PSERVERS_IP_PORT_LIST / the endpoints given to the transpiler")
    return host, int(port)


def _grpc():
    import grpc  # only here: `import spmd` must not load grpc

    return grpc


def _options(max_message_bytes: int) -> list:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.enable_http_proxy", 0)]


class _Rejected(Exception):
    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code = code


def _field(call: str, meta: dict, key: str, kind: str):
    value = meta.get(key)
    ok = {"int": isinstance(value, int) and not isinstance(value, bool),
          "int?": value is None or isinstance(value, int) and not isinstance(value, bool),
          "bool?": value is None or isinstance(value, bool),
          "str": isinstance(value, str) and bool(value),
          "kind": value in BARRIER_KINDS,
          "names": isinstance(value, list) and all(isinstance(n, str) and n for n in value)
          and len(set(value)) == len(value)}[kind]
    if not ok:
        raise _Rejected("INVALID_ARGUMENT", f"{call}: field {key!r} is {value!r}; expected "
                                            f"{_EXPECT[kind]}")
    return value


class PServer:
    """A gRPC server on exactly `endpoint` ("host:port"; port 0 picks a free one, see
    `.endpoint`) passing the calls of `trainers` trainers to `handler` (a PServerHandler).
    Each waiting call holds one of `max_workers` threads (default 2 * trainers + 8)."""

    def __init__(self, endpoint: str, handler: PServerHandler, trainers: int, *,
                 max_workers: int | None = None, max_message_bytes: int = MAX_FRAME_BYTES,
                 max_wait_s: float | None = None, token: str | None = None):
        self._host, self._port = parse_endpoint(endpoint)
        self._admit = _token_hello(token or job_token())
        self.refused = 0  # calls refused: not this job's
        if not isinstance(trainers, int) or trainers < 1:
            raise InvalidArgumentError(f"PServer({endpoint!r}): trainers must be a positive "
                                       f"integer, got {trainers!r}")
        self.handler, self.trainers = handler, trainers
        self.max_workers = max_workers or 2 * trainers + 8
        self.max_message_bytes = max_message_bytes
        self.max_wait_s = flags().ps_rpc_deadline_s if max_wait_s is None else max_wait_s
        self.completed: set = set()
        self._done = threading.Condition()
        self._server = None

    @property
    def endpoint(self) -> str:
        return f"{self._host}:{self._port}"

    def start(self) -> PServer:
        grpc = _grpc()
        rpc = {call: grpc.unary_unary_rpc_method_handler(
            lambda request, context, call=call: self._serve(call, request, context))
            for call in _CALLS}
        server = grpc.server(
            ThreadPoolExecutor(self.max_workers, thread_name_prefix=f"pserver-{self._port}"),
            handlers=[_admission(grpc.method_handlers_generic_handler(SERVICE, rpc), self)],
            # SO_REUSEPORT off: a second server on a port in use fails instead of sharing it
            options=_options(self.max_message_bytes) + [("grpc.so_reuseport", 0)])
        try:
            port = server.add_insecure_port(self.endpoint)
        except RuntimeError as exc:
            port, why = 0, str(exc).split(";")[0].rstrip(".")
        else:
            why = "gRPC could not bind it"
        if not port:
            server.stop(None)
            raise CommunicationError(
                f"pserver could not listen on {self.endpoint}: {why}. Is another process "
                f"using port {self._port} (`ss -ltnp | grep :{self._port}`), or is "
                f"{self._host} not an address of this machine? Give the pserver a free "
                f"port of its own host in the endpoint list")
        self._port = port
        server.start()
        self._server = server
        log.info("pserver listening on %s for %d trainers", self.endpoint, self.trainers)
        return self

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: waiting handler calls are woken (handler.shutdown()), in-flight
        calls get `grace` seconds."""
        if self._server is None:
            return
        self.handler.shutdown()
        self._server.stop(grace).wait(None if grace is None else grace + 5.0)
        self._server = None

    def wait_complete(self, timeout: float) -> bool:
        """Wait until every trainer called complete; False when `timeout` passed first."""
        with self._done:
            return self._done.wait_for(lambda: len(self.completed) >= self.trainers, timeout)

    def __enter__(self):
        return self.start() if self._server is None else self

    def __exit__(self, *exc):
        self.stop()

    # -- one call ------------------------------------------------------------------------------
    def _serve(self, call: str, request: bytes, context) -> bytes:
        grpc, trainer = _grpc(), "?"
        try:
            try:
                frame = decode_frame(request, max_frame_bytes=self.max_message_bytes)
            except WireError as exc:
                raise _Rejected("INVALID_ARGUMENT", str(exc)) from None
            meta, values = frame.meta, frame.values
            if "trainer_id" not in meta:
                raise _Rejected("INVALID_ARGUMENT", "the request has no trainer_id")
            trainer = meta["trainer_id"]
            if not isinstance(trainer, int) or isinstance(trainer, bool):
                raise _Rejected("INVALID_ARGUMENT", f"trainer_id is {trainer!r}; expected an "
                                                    f"integer")
            if not 0 <= trainer < self.trainers:
                raise _Rejected("OUT_OF_RANGE", (
                    f"trainer id {trainer} is out of range: this pserver serves trainers "
                    f"0..{self.trainers - 1}; check PADDLE_TRAINER_ID and "
                    f"PADDLE_TRAINERS_NUM (the trainers given to the transpiler)"))
            fields = _CALLS[call]
            extra = set(meta) - set(fields) - {"trainer_id"}
            if extra:
                raise _Rejected("INVALID_ARGUMENT", f"unknown fields {sorted(extra)}")
            args = {key: _field(call, meta, key, kind) for key, kind in fields.items()}
            allowed = {"send_variables": set(values), "prefetch": {"ids"}}.get(call, set())
            if set(values) - allowed or (call == "prefetch" and not values):
                raise _Rejected("INVALID_ARGUMENT", f"{call} carries values {sorted(values)}; "
                                f"expected {sorted(allowed) or 'none'}")
            remaining = context.time_remaining()
            remaining = self.max_wait_s if remaining is None else min(remaining,
                                                                      self.max_wait_s)
            wait = max(0.0, remaining - min(2.0, 0.1 * remaining))
            reply = self._dispatch(call, trainer, args, values, wait)
            return encode_frame(reply)
        except Exception as exc:  # every failure goes to this caller only
            code, reason = _classify(exc)
            message = f"pserver {self.endpoint}: {call} from trainer {trainer} " \
                      f"({context.peer()}) failed: {reason}"
            if code == "INTERNAL":
                log.exception(message)
            else:
                log.error(message)
            context.set_code(getattr(grpc.StatusCode, code))
            context.set_details(reason[:_MAX_DETAILS])
            return b""

    def _dispatch(self, call, trainer, args, values, wait):
        h = self.handler
        if call == "send_variables":
            h.send_variables(trainer, args["step"], values)
            if args["then_barrier"]:
                h.barrier(trainer, "send", args["step"], wait)
            return None
        if call == "get_variables":
            got = h.get_variables(trainer, args["names"], args["min_step"], wait)
            if args["then_fetch_barrier"] is not None:
                h.barrier(trainer, "fetch", args["then_fetch_barrier"], wait)
            return got
        if call == "prefetch":
            ids = values["ids"]
            if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu":
                raise _Rejected("INVALID_ARGUMENT", "prefetch ids must be a 1-D integer array")
            return {args["table"]: h.prefetch(trainer, args["table"], ids.astype(np.int64),
                                              wait)}
        if call == "barrier":
            return h.barrier(trainer, args["kind"], args["step"], wait)
        if call == "checkpoint_notify":
            return h.checkpoint_notify(trainer, args["dirname"])
        h.complete(trainer)
        with self._done:
            self.completed.add(trainer)
            self._done.notify_all()
        return None


def _admission(inner, server: PServer):
    """The service lookup, checking the job token's hello in a call's metadata first: a call
    that is not this job's gets a handler that refuses it without decoding its request."""
    grpc = _grpc()

    class Admission(grpc.GenericRpcHandler):
        def service(self, details):
            if server._admit is not None:
                got = dict(details.invocation_metadata or ()).get(_TOKEN_KEY)
                if not isinstance(got, str) or not hmac.compare_digest(got, server._admit):
                    why = "no job token" if got is None else "another job's token"
                    return grpc.unary_unary_rpc_method_handler(
                        lambda request, context: _refuse(server, details.method, why, context))
            return inner.service(details)

    return Admission()


def _refuse(server: PServer, method: str, why: str, context) -> bytes:
    server.refused += 1
    log.error("pserver %s: refused a call to %s from %s: %s (set the same SPMD_JOB_TOKEN "
              "on every trainer and pserver of the job)", server.endpoint, method,
              context.peer(), why)
    context.abort(_grpc().StatusCode.PERMISSION_DENIED,
                  f"this pserver belongs to another job ({why})")


def _classify(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, _Rejected):
        return exc.code, str(exc)
    for kind, code in ((NotFoundError, "NOT_FOUND"), (InvalidArgumentError, "INVALID_ARGUMENT"),
                       (TimeoutError, "DEADLINE_EXCEEDED"),
                       (PreconditionError, "FAILED_PRECONDITION")):
        if isinstance(exc, kind):
            return code, str(exc)
    return "INTERNAL", f"{type(exc).__name__}: {exc} (a pserver bug; see the pserver's log)"


_FIX = {
    "DEADLINE_EXCEEDED": "If it waits for slower trainers raise SPMD_PS_RPC_DEADLINE (seconds), "
                         "else check that the pserver is alive (its log)",
    "RESOURCE_EXHAUSTED": "the frame is over the gRPC message limit: send fewer variables per "
                          "call or slice them (DistributeTranspilerConfig.slice_var_up)",
    "CANCELLED": "the pserver was stopping",
    "PERMISSION_DENIED": "give every trainer and pserver of the job the same SPMD_JOB_TOKEN "
                         "(paddle-launch does)",
}


_BYTES_LOCK = threading.Lock()
_BYTES = {"sent": 0, "received": 0}  # every PServerClient of this process, since it started


_ROWS = {"sent": 0, "received": 0, "prefetched": 0}


def client_bytes() -> dict:
    """{"sent": n, "received": n}: the frame bytes all the pserver clients of this process
    sent in requests and received in replies (retries and failed calls included), since the
    process started. Take it before and after a step for the bytes on the wire per step."""
    with _BYTES_LOCK:
        return dict(_BYTES)


def client_rows() -> dict:
    """{"sent": n, "received": n, "prefetched": n}: the rows of the values all the pserver
    clients of this process sent (send_variables: a SelectedRows gradient counts its rows, a
    dense value its first dim) and received (get_variables and prefetch replies), and the
    table rows prefetch asked for, over the calls that succeeded since the process started.
    A sparse step's count is its looked-up rows, not its table's: take it before and after
    a step."""
    with _BYTES_LOCK:
        return dict(_ROWS)


def _rows_of(values) -> int:
    """Rows of the values of a frame: a SelectedRows its rows, an array its first dim."""
    n = 0
    for v in (values or {}).values():
        if isinstance(v, SelectedRows):
            n += int(np.asarray(v.rows).size)
        else:
            shape = getattr(getattr(v, "array", v), "shape", ())
            n += int(shape[0]) if len(shape) else 1
    return n


class PServerClient:
    """Trainer `trainer_id`'s connection to the pserver at `endpoint`. Thread-safe: the
    trainer may run several calls at once. `deadline` (seconds, default SPMD_PS_RPC_DEADLINE)
    bounds every call, its retries and its waits included; `max_retries` (default: as many as
    the deadline allows) bounds the retries while nothing listens at the endpoint yet.
    `bytes_sent` / `bytes_received` count this client's frame bytes (client_bytes(): all of
    this process's clients)."""

    def __init__(self, endpoint: str, trainer_id: int, *, deadline: float | None = None,
                 max_retries: int | None = None, max_message_bytes: int = MAX_FRAME_BYTES,
                 backoff: tuple[float, float] = (0.05, 1.0), token: str | None = None):
        parse_endpoint(endpoint)
        mine = _token_hello(token or job_token())
        self._metadata = ((_TOKEN_KEY, mine),) if mine else None
        self.endpoint, self.trainer_id = endpoint, int(trainer_id)
        self.deadline = flags().ps_rpc_deadline_s if deadline is None else float(deadline)
        if not self.deadline > 0:
            raise InvalidArgumentError(f"pserver call deadline must be > 0 seconds, got "
                                       f"{self.deadline}; set SPMD_PS_RPC_DEADLINE to e.g. 180")
        self.max_retries, self.backoff = max_retries, backoff
        self.max_message_bytes = max_message_bytes
        grpc = _grpc()
        ms = int(backoff[0] * 1000)
        self._channel = grpc.insecure_channel(endpoint, options=_options(max_message_bytes) + [
            ("grpc.initial_reconnect_backoff_ms", ms), ("grpc.min_reconnect_backoff_ms", ms),
            ("grpc.max_reconnect_backoff_ms", int(backoff[1] * 1000))])
        self._stubs = {call: self._channel.unary_unary(f"/{SERVICE}/{call}") for call in _CALLS}
        self._reached = False  # once the pserver answered, UNAVAILABLE means it is gone
        self.bytes_sent = self.bytes_received = 0

    # -- the calls -----------------------------------------------------------------------------
    def send_variables(self, values: dict, step: int = 0, *, then_barrier: bool = False,
                       timeout=None) -> None:
        """Send `values` ({name: ndarray | LoDTensor | SelectedRows}) of step `step`; with
        `then_barrier`, also wait at that step's send barrier (one round trip for both)."""
        meta = {"step": int(step)}
        if then_barrier:
            meta["then_barrier"] = True
        self._call("send_variables", meta, values, timeout)

    def get_variables(self, names, min_step: int | None = None, *,
                      then_fetch_barrier: int | None = None, timeout=None) -> dict:
        """The pserver's values of `names`; with `min_step`, once it finished that step; with
        `then_fetch_barrier` (a fetch step), the reply comes after that fetch barrier."""
        meta = {"names": list(names), "min_step": None if min_step is None else int(min_step)}
        if then_fetch_barrier is not None:
            meta["then_fetch_barrier"] = int(then_fetch_barrier)
        return self._call("get_variables", meta, None, timeout).values

    def prefetch(self, table: str, ids, *, timeout=None) -> np.ndarray:
        """Rows `ids` of the distributed table `table`."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        return self._call("prefetch", {"table": table}, {"ids": ids}, timeout).values[table]

    def barrier(self, kind: str, step: int = 0, *, timeout=None) -> None:
        self._call("barrier", {"kind": kind, "step": int(step)}, None, timeout)

    def send_barrier(self, step: int = 0, *, timeout=None) -> None:
        """Wait until every trainer sent its gradients of this step (fluid's send_barrier)."""
        self.barrier("send", step, timeout=timeout)

    def fetch_barrier(self, step: int = 0, *, timeout=None) -> None:
        """Wait until every trainer fetched its parameters (fluid's fetch_barrier)."""
        self.barrier("fetch", step, timeout=timeout)

    def checkpoint_notify(self, dirname: str, *, timeout=None) -> None:
        self._call("checkpoint_notify", {"dirname": str(dirname)}, None, timeout)

    def complete(self, *, timeout=None) -> None:
        """This trainer is done (fluid's Executor.close())."""
        self._call("complete", {}, None, timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- one call with its deadline and retries ------------------------------------------------
    def _call(self, call: str, meta: dict, values, timeout):
        grpc = _grpc()
        request = encode_frame(values, {"trainer_id": self.trainer_id, **meta})
        deadline = self.deadline if timeout is None else float(timeout)
        end = time.monotonic() + deadline
        delay, attempts = self.backoff[0], 0
        while True:
            attempts += 1
            self._count("sent", len(request))
            try:
                reply = self._stubs[call](request, timeout=max(end - time.monotonic(), 1e-3),
                                          metadata=self._metadata)
            except grpc.RpcError as exc:
                code = exc.code()
                left = end - time.monotonic()
                retry = (code == grpc.StatusCode.UNAVAILABLE and not self._reached
                         and left > 0 and (self.max_retries is None
                                           or attempts <= self.max_retries))
                if retry:
                    time.sleep(min(delay, left))
                    delay = min(2 * delay, self.backoff[1])
                    if end - time.monotonic() > 0.01:
                        continue
                raise self._error(call, code.name, exc.details() or "", attempts,
                                  deadline) from None
            self._reached = True
            self._count("received", len(reply))
            try:
                frame = decode_frame(reply, max_frame_bytes=self.max_message_bytes)
            except WireError as exc:
                raise self._error(call, "DATA_LOSS", f"its reply is not valid: {exc}",
                                  attempts, deadline) from None
            self._count_rows(call, values, frame.values)
            return frame

    def _count_rows(self, call: str, sent, received) -> None:
        with _BYTES_LOCK:
            if call == "prefetch":
                _ROWS["prefetched"] += _rows_of(sent)
            elif call == "send_variables":
                _ROWS["sent"] += _rows_of(sent)
            _ROWS["received"] += _rows_of(received)

    def _count(self, key: str, n: int) -> None:
        with _BYTES_LOCK:
            _BYTES[key] += n
            setattr(self, f"bytes_{key}", getattr(self, f"bytes_{key}") + n)

    def _error(self, call, code, details, attempts, deadline) -> RpcError:
        where = f"[trainer {self.trainer_id}] {call} to pserver {self.endpoint}"
        if code == "UNAVAILABLE" and not self._reached:
            cls, what = PServerUnavailable, (
                f"nothing answered after {attempts} attempts over {deadline:g} s ({details}). "
                f"Start the pserver first, check the endpoint (PADDLE_PSERVERS_IP_PORT_LIST) "
                f"and that it is reachable from here, or raise SPMD_PS_RPC_DEADLINE if it "
                f"needs longer to start")
        elif code == "UNAVAILABLE":
            cls, what = PServerUnavailable, (
                f"the pserver stopped answering ({details}); it answered before, so it has "
                f"probably died: see its log")
        elif code == "DEADLINE_EXCEEDED":
            waited = details and details != "Deadline Exceeded"  # the pserver's own reason
            cls, what = RpcTimeout, ((f"the pserver gave up waiting: {details}" if waited else
                                      f"no answer within the deadline of {deadline:g} s")
                                     + f". {_FIX[code]}")
        else:
            cls, what = RequestRejected, f"{code}: {details}" + (
                f". {_FIX[code]}" if code in _FIX else "")
        return cls(f"{where} failed: {what}", endpoint=self.endpoint, call=call,
                   trainer_id=self.trainer_id, code=code)
