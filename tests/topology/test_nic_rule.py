"""The one rule for which NICs a GPU's traffic uses (NCCL's local NICs, PXN), shared by both models."""

from __future__ import annotations

import pytest

from slowlink.topology.nic import affine_nics, group_nics, nic_share, peer_nics


def test_a_gpu_reaches_its_affine_nics_only() -> None:
    assert affine_nics(2, 4, 0) == [0] and affine_nics(2, 4, 3) == [1]     # 2 GPUs per NIC
    assert affine_nics(4, 2, 1) == [2, 3]                                  # 2 NICs per GPU
    assert group_nics(2, 4, [0, 1]) == {0}
    assert group_nics(2, 4, [0, 3]) == {0, 1}
    assert group_nics(8, 8, range(8)) == set(range(8))


def test_pxn_sends_by_the_peers_rail_only_through_a_member_there() -> None:
    # source GPU 0; the peer sits on GPU 7: through the member on GPU 7 when the source node has one
    assert peer_nics(8, 8, 0, 7, {0, 7}) == [7]
    assert peer_nics(8, 8, 0, 7, {0}) == [0]
    assert peer_nics(4, 2, 0, 0, {0}) == [0, 1]


@pytest.mark.parametrize(("nics", "gpn", "groups", "share"), [
    (8, 8, [{0}], 1.0),                          # one rank per node: its GPU's NIC, not the node's 8
    (8, 8, [{g} for g in range(8)], 1.0),        # eight such groups: one NIC each
    (2, 8, [{g} for g in range(8)], 0.25),       # eight groups over 2 NICs
    (2, 8, [{0}, {1}], 0.5),                     # GPUs 0 and 1 share NIC 0
    (8, 8, [set(range(8))], 8.0),                # the full node
    (4, 2, [{0}], 2.0),                          # 2 NICs per GPU: channels over both
])
def test_each_nic_is_shared_by_the_groups_using_it(nics: int, gpn: int, groups: list[set[int]],
                                                   share: float) -> None:
    assert nic_share(nics, gpn, groups) == pytest.approx(share)
