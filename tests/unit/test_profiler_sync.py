"""fluid.profiler on a GPU: every time stamp waits for the device's queued work first, so an
op's event is its execution, not its launch. No GPU here: a stand-in `cupy` module in
sys.modules counts the waits; without cupy nothing waits and cupy is not imported."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import spmd.fluid as fluid
import spmd.fluid.profiler as profiler
from spmd import profiler as core_profiler
from spmd.core.places import CPUPlace, CUDAPlace


class FakeCupy(types.ModuleType):
    """What the profiler uses of cupy: the device count and Device(i).synchronize."""

    def __init__(self, devices: int = 1):
        super().__init__("cupy")
        self.waits: list = []
        fake = self

        class Device:
            def __init__(self, device_id=None):
                self.device_id = device_id

            def synchronize(self):
                fake.waits.append(self.device_id)

        def count():
            if devices < 0:
                raise RuntimeError("no CUDA driver")
            return devices

        self.cuda = types.SimpleNamespace(Device=Device,
                                          runtime=types.SimpleNamespace(getDeviceCount=count))


def step_fn():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 3))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return lambda: exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss],
                           scope=scope)


def profile(step, tmp_path, place=None) -> list:
    profiler.start_profiler("All")
    recorder = core_profiler.active()
    if place is not None:
        recorder.use_place(place)
    try:
        step()
    finally:
        profiler.stop_profiler("total", str(tmp_path / "profile"))
    return recorder.events


def test_gpu_in_use_every_stamp_waits_for_the_device(tmp_path, monkeypatch, capsys):
    step = step_fn()
    cupy = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    events = profile(step, tmp_path)
    ops = [e for e in events if e[0] not in ("feed", "fetch", "Executor::Run")]
    assert len(ops) >= 5
    # a wait before the start stamp and before the end stamp of every event
    assert len(cupy.waits) >= 2 * len(ops) + 2
    assert set(cupy.waits) == {None}  # the current device


def test_a_host_place_named_by_the_plan_never_waits(tmp_path, monkeypatch, capsys):
    step = step_fn()
    cupy = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    events = profile(step, tmp_path, place=CPUPlace())
    assert events and cupy.waits == []


def test_a_gpu_place_waits_for_its_own_device(monkeypatch):
    cupy = FakeCupy(devices=2)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    sync = core_profiler.device_synchronizer(CUDAPlace(1))
    sync()
    assert cupy.waits == [1]
    assert core_profiler.device_synchronizer(CPUPlace()) is None


@pytest.mark.parametrize("devices", [0, -1])
def test_cupy_without_a_usable_gpu_does_not_wait(devices, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", FakeCupy(devices=devices))
    assert core_profiler.device_synchronizer() is None


def test_without_cupy_nothing_waits_and_cupy_is_not_imported(tmp_path, capsys):
    if "cupy" in sys.modules:
        pytest.skip("cupy was imported by an earlier test in this process")
    step = step_fn()
    profiler.start_profiler("GPU")
    recorder = core_profiler.active()
    try:
        step()
        assert recorder.synchronize is None
    finally:
        profiler.stop_profiler(None, str(tmp_path / "profile"))
    assert "cupy" not in sys.modules
    assert core_profiler.now_ns() > 0  # profiling off: a plain stamp


def test_use_place_applies_to_the_calling_thread_only(tmp_path, monkeypatch, capsys):
    import threading

    cupy = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    profiler.start_profiler("All")
    try:
        recorder = core_profiler.active()

        def host_thread():
            recorder.use_place(CPUPlace())
            for _ in range(3):
                core_profiler.now_ns()

        worker = threading.Thread(target=host_thread)
        worker.start()
        worker.join()
        assert cupy.waits == []  # the host-place thread never waits
        core_profiler.now_ns()
        assert cupy.waits == [None]  # this thread still waits for its current device
    finally:
        profiler.stop_profiler(None, str(tmp_path / "profile"))
