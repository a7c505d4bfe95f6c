"""fluid.contrib.slim.nas.light_nas_strategy: LightNASStrategy, slim's network search. The
context's search space (a SearchSpace) turns tokens into networks; each search step (every
retrain_epoch epochs from epoch 0 to end_epoch) builds the network of the current tokens
(trying the controller's neighbours, up to 100 times, until its FLOPs are within target_flops
and, when target_latency > 0, its latency within it), trains it retrain_epoch epochs (0: only
evaluates), and reports the metric as the reward (0 when over a constraint) to the controller
server through a SearchAgent, which answers the next tokens.

With is_server, the first strategy of this machine to start (a lock file in the working
directory records it) runs the ControllerServer; the others reach it on 127.0.0.1."""
from __future__ import annotations

import logging
import os

from ....executor import Executor
from ....log_helper import get_logger
from ..core.strategy import Strategy
from .controller_server import ControllerServer
from .lock import lock, unlock
from .search_agent import SearchAgent
from .wire import check_loopback

__all__ = ["LightNASStrategy"]

_logger = get_logger(__name__, logging.INFO,
                     fmt="LightNASStrategy-%(asctime)s-%(levelname)s: %(message)s")

LOCK_FILE = "./slim_LightNASStrategy_controller_server.socket"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LightNASStrategy(Strategy):
    """See the module doc. server_ip must be a loopback address (None: 127.0.0.1)."""

    def __init__(self, controller=None, end_epoch=1000, target_flops=629145600,
                 target_latency=0, retrain_epoch=1, metric_name="top1_acc", server_ip=None,
                 server_port=0, is_server=False, max_client_num=100, search_steps=None,
                 key="light-nas"):
        super().__init__(0, end_epoch)
        self._max_flops = target_flops
        self._max_latency = target_latency
        self._metric_name = metric_name
        self._controller = controller
        self._retrain_epoch = retrain_epoch
        self._server_ip = check_loopback(server_ip, "LightNASStrategy")
        self._server_port = server_port
        self._is_server = bool(is_server)
        self._search_steps = search_steps
        self._max_client_num = max_client_num
        self._max_try_times = 100
        self._key = key
        self._server = None
        self._search_agent = None
        self._current_tokens = None
        self._current_reward = None

    def __getstate__(self):
        """Sockets are not state."""
        return {k: v for k, v in super().__getstate__().items()
                if k not in ("_search_agent", "_server")}

    @property
    def current_tokens(self):
        return self._current_tokens

    @property
    def current_reward(self):
        return self._current_reward

    @property
    def server(self):
        """The ControllerServer this strategy started (None when another process runs it)."""
        return self._server

    def on_compression_begin(self, context):
        if context.search_space is None:
            raise ValueError("LightNASStrategy needs the Compressor's search_space")
        self._current_tokens = list(context.search_space.init_tokens())
        self._controller.reset(context.search_space.range_table(), self._current_tokens,
                               None)
        if self._is_server:
            self._start_or_find_server()
        self._search_agent = SearchAgent(self._server_ip, self._server_port, key=self._key)

    def _start_or_find_server(self):
        open(LOCK_FILE, "a").close()
        with open(LOCK_FILE, "r+") as f:
            lock(f)
            try:
                fields = f.readline().split()
                if len(fields) == 2 and fields[0].isdigit() and _alive(int(fields[0])) \
                        and int(fields[0]) != os.getpid():
                    self._server_port = int(fields[1])
                    return
                self._server = ControllerServer(
                    controller=self._controller, address=(self._server_ip, self._server_port),
                    max_client_num=self._max_client_num, search_steps=self._search_steps,
                    key=self._key)
                self._server.start()
                self._server_port = self._server.port()
                f.seek(0)
                f.truncate()
                f.write(f"{os.getpid()} {self._server_port}\n")
                f.flush()
            finally:
                unlock(f)

    def _step(self, epoch_id, last):
        if not self.start_epoch <= epoch_id <= last:
            return False
        return self._retrain_epoch == 0 or (epoch_id - self.start_epoch) % \
            self._retrain_epoch == 0

    def _over(self, flops, latency):
        return flops > self._max_flops or (self._max_latency > 0 and
                                           latency > self._max_latency)

    def on_epoch_begin(self, context):
        if not self._step(context.epoch_id, self.end_epoch):
            return
        space = context.search_space
        best_flops, best_tokens = None, list(self._current_tokens)
        for _ in range(self._max_try_times):
            startup, train, test, _, _, train_reader, test_reader = space.create_net(
                self._current_tokens)
            context.eval_graph.program = test
            flops = context.eval_graph.flops()
            if best_flops is None or flops < best_flops:
                best_flops, best_tokens = flops, list(self._current_tokens)
            latency = space.get_model_latency(test) if self._max_latency > 0 else 0
            _logger.info("try %s: flops %s, latency %s", self._current_tokens, flops, latency)
            if not self._over(flops, latency):
                break
            self._current_tokens = self._controller.next_tokens(best_tokens)
        context.train_reader = train_reader
        context.eval_reader = test_reader
        Executor(context.place).run(startup, scope=context.scope)
        context.optimize_graph.program = train
        context.optimize_graph.compiled_graph = None
        context.skip_training = self._retrain_epoch == 0

    def on_epoch_end(self, context):
        ends_step = self._retrain_epoch == 0 or \
            (context.epoch_id - self.start_epoch + 1) % self._retrain_epoch == 0
        if not (self.start_epoch <= context.epoch_id < self.end_epoch and ends_step):
            return
        reward = context.eval_results[self._metric_name][-1]
        flops = context.eval_graph.flops()
        latency = 0
        if self._max_latency > 0:
            latency = context.search_space.get_model_latency(
                context.search_space.create_net(self._current_tokens)[2])
        if self._over(flops, latency):
            reward = 0.0
        self._current_reward = float(reward)
        _logger.info("reward: %s; flops: %s; latency: %s; tokens: %s", reward, flops, latency,
                     self._current_tokens)
        self._current_tokens = self._search_agent.update(self._current_tokens,
                                                         self._current_reward)

    def on_compression_end(self, context):
        if self._server is not None:
            self._server.close()
