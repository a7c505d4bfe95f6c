"""slim's light NAS: the ControllerServer and SearchAgent talk text lines over 127.0.0.1 only,
under timeouts (a silent, wrong-key, malformed or oversized request is dropped and the server
goes on), and stop after search_steps; LightNASStrategy searches a tiny search space inside a
Compressor run (the networks it trains keep to target_flops, each step's reward reaches the
controller through the server)."""
import os
import socket

import numpy as np
import pytest

import spmd.fluid as fluid
from spmd.fluid.contrib.slim.core import Compressor
from spmd.fluid.contrib.slim.graph import GraphWrapper
from spmd.fluid.contrib.slim.nas import (
    ControllerServer,
    LightNASStrategy,
    SearchAgent,
    SearchSpace,
)
from spmd.fluid.contrib.slim.nas.wire import MAX_LINE
from spmd.fluid.contrib.slim.searcher import SAController


@pytest.fixture
def served():
    np.random.seed(0)
    controller = SAController(init_temperature=10)
    controller.reset([5, 5], [1, 2])
    server = ControllerServer(controller, key="k", timeout=0.5, search_steps=None)
    server.start()
    yield controller, server
    server.close()
    assert server.closed()


def _raw(server, data, read=True):
    with socket.create_connection((server.ip(), server.port()), timeout=5) as conn:
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)
        return conn.recv(1024) if read else b""


def test_loopback_only():
    with pytest.raises(ValueError, match="loopback"):
        ControllerServer(SAController(), address=("0.0.0.0", 0))
    with pytest.raises(ValueError, match="loopback"):
        SearchAgent("10.1.2.3", 1234)
    with pytest.raises(ValueError, match="loopback"):
        LightNASStrategy(SAController(), server_ip="192.168.0.1")
    assert SearchAgent(None, 1).server_ip == "127.0.0.1"


def test_agent_updates_the_controller(served):
    controller, server = served
    assert server.ip() == "127.0.0.1" and server.port() > 0
    agent = SearchAgent(server.ip(), server.port(), key="k")
    tokens = agent.next_tokens()
    assert len(tokens) == 2 and all(0 <= t < 5 for t in tokens)
    assert controller.iteration == 0
    following = agent.update([3, 4], 0.75)
    assert controller.iteration == 1 and controller.best_tokens == [3, 4]
    assert controller.max_reward == 0.75 and len(following) == 2
    # the wire is one text line each way
    reply = _raw(server, b"next_tokens\n")
    assert reply.endswith(b"\n") and len(reply.decode().strip().split(",")) == 2


def test_bad_requests_are_dropped_and_serving_goes_on(served):
    controller, server = served
    with pytest.raises(ConnectionError, match="closed without answering"):
        SearchAgent(server.ip(), server.port(), key="wrong").update([1, 1], 9.0)
    assert _raw(server, b"k\t1,x\t0.5\n") == b""  # tokens that are not ints
    assert _raw(server, b"k" * (MAX_LINE + 10)) == b""  # too long
    with socket.create_connection((server.ip(), server.port()), timeout=5) as silent:
        # it sends nothing: the server gives up on it after its timeout (0.5 s)
        assert silent.recv(16) == b""
    assert controller.iteration == 0 and controller.max_reward == -1
    agent = SearchAgent(server.ip(), server.port(), key="k")
    agent.update([0, 0], 0.1)
    assert controller.iteration == 1


def test_server_stops_after_search_steps():
    controller = SAController()
    controller.reset([3], [0])
    server = ControllerServer(controller, key="k", search_steps=2, timeout=2)
    server.start()
    agent = SearchAgent(server.ip(), server.port(), key="k", timeout=5)
    agent.update([1], 0.1)
    agent.update([2], 0.2)
    server.close()  # joins: the loop ended with the second update
    assert server.closed() and controller.iteration == 2
    with pytest.raises(OSError):
        agent.update([0], 0.3)


class Widths(SearchSpace):
    """tokens [t]: a hidden fc layer of 4 * (t + 1) units."""

    def init_tokens(self):
        return [3]

    def range_table(self):
        return [4]

    def create_net(self, tokens):
        hidden = 4 * (tokens[0] + 1)
        with fluid.unique_name.guard():  # the same variable names for every network
            main, start = fluid.Program(), fluid.Program()
            with fluid.program_guard(main, start):
                x = fluid.data("x", [None, 8])
                y = fluid.data("y", [None, 1], dtype="int64")
                h = fluid.layers.fc(x, hidden, act="relu")
                logits = fluid.layers.fc(h, 3)
                loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
                acc = fluid.layers.accuracy(fluid.layers.softmax(logits), y)
                test = main.clone(for_test=True)
                fluid.optimizer.SGD(0.1).minimize(loss)
        self.names = {"loss": loss.name, "acc": acc.name}
        return start, main, test, None, None, reader, reader

    def get_model_latency(self, program):
        """The hidden layer's width stands for the latency."""
        return program.global_block().var("fc_0.w_0").shape[1]


def reader():
    rng = np.random.RandomState(1)
    for _ in range(3):
        yield [(rng.randn(8).astype("float32"), np.array([rng.randint(3)], "int64"))
               for _ in range(8)]


@pytest.mark.parametrize("constraint", ["flops", "latency"])
def test_light_nas_searches_within_its_constraints(tmp_path, monkeypatch, constraint):
    monkeypatch.chdir(tmp_path)  # the strategy's lock file
    np.random.seed(2)
    space = Widths()
    start, train, test, _, _, _, _ = space.create_net(space.init_tokens())
    flops_of = {t: GraphWrapper(space.create_net([t])[2]).flops() for t in range(4)}
    # widths 12 and 16 are over either constraint
    target = flops_of[1] if constraint == "flops" else 10 ** 9
    latency = 8 if constraint == "latency" else 0
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(start, scope=scope)
    feeds = [("x", "x"), ("y", "y")]
    comp = Compressor(fluid.CPUPlace(), scope, train, train_reader=reader,
                      train_feed_list=feeds, train_fetch_list=[("loss", space.names["loss"])],
                      eval_program=test, eval_reader=reader, eval_feed_list=feeds,
                      eval_fetch_list=[("acc", space.names["acc"])], search_space=space,
                      log_period=100)
    controller = SAController(reduce_rate=0.9, init_temperature=1024, max_iter_number=300)
    strategy = LightNASStrategy(controller, end_epoch=3, target_flops=target,
                                target_latency=latency, retrain_epoch=1, metric_name="acc",
                                is_server=True, search_steps=3, key="nas")
    comp._add_strategy(strategy)
    seen = []

    class Watch(fluid.contrib.slim.core.Strategy):
        def on_epoch_begin(self, context):  # after the search strategy built its network
            seen.append((list(strategy.current_tokens), context.eval_graph.flops()))

    comp._add_strategy(Watch(0, 3))
    comp.run()
    assert comp.failed_epochs == []
    assert len(seen) == 3
    for tokens, flops in seen:
        assert flops == flops_of[tokens[0]] and tokens[0] <= 1  # width 4 or 8
    assert controller.iteration == 3  # each step's reward went through the server
    assert len(comp.context.eval_results["acc"]) == 3
    assert controller.max_reward == max(comp.context.eval_results["acc"])
    with open("slim_LightNASStrategy_controller_server.socket") as f:
        pid, port = f.read().split()
    assert int(pid) == os.getpid() and int(port) == strategy.server.port()
    assert strategy.server.closed()
