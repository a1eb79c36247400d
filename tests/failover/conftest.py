"""The failover tests' fixtures (the cluster itself is the root conftest's ``patroni_cluster``).

  cluster    function  the session's PatroniCluster, healthy and in synchronous mode on
                       entry (a test that killed a node or switched the mode leaves it so
                       only until the next test asks)
  figures    session   support.figures.Figures: lines a test measured, printed at the end
                       of the run under "failover figures" (without -s)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from support.figures import Figures

if TYPE_CHECKING:
    from support.patroni import PatroniCluster


@pytest.fixture(scope="session")
def figures(pytestconfig: pytest.Config) -> Figures:
    return Figures.registered(pytestconfig, "failover figures")


@pytest.fixture
def cluster(patroni_cluster: PatroniCluster) -> PatroniCluster:
    for node in patroni_cluster.nodes:  # a test that failed mid-round left one down
        if not node.patroni_alive:
            patroni_cluster.start_node(node)
    if not patroni_cluster.synchronous_mode():
        patroni_cluster.set_synchronous(True)
    patroni_cluster.wait_healthy(synchronous=True)
    return patroni_cluster
