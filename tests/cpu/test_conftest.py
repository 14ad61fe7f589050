"""What tests/conftest.py promises about how a run is spread over pytest-xdist's workers."""

from __future__ import annotations

import pytest


class _Node:
    """Stands for one xdist worker: records the test indexes the scheduler sends it."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[list[int]] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)

    def shutdown(self) -> None:
        pass


def test_xdist_hands_out_files_in_collection_order(pytestconfig, monkeypatch):
    # A file of few slow tests (the zoo) first in the collection, then a file of many fast ones: the first goes out
    # first, not last behind the files with more tests.
    scheduler_module = pytest.importorskip("xdist.scheduler")
    collection = ["tests/tt/test_few.py::test_a", *(f"tests/cpu/test_many.py::test_{i}" for i in range(5))]
    monkeypatch.setattr(pytestconfig.option, "tx", ["popen"])  # one worker (-n 1), as the scheduler reads it
    scheduler = scheduler_module.LoadFileScheduling(pytestconfig)
    node = _Node("gw0")
    scheduler.add_node(node)
    scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    assert node.sent[0] == [0], f"the first file sent is {[collection[i] for i in node.sent[0]]}"
