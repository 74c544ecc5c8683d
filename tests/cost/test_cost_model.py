"""Cost model: capex and power add up from the price book, the network share, $/hour and $/M tokens (with the
ETTR seam), and the reference network-share table's shape (tiers, scale, oversubscription)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.cost.design import Design, build_design, network_share_table
from slowlink.cost.model import HOURS_PER_YEAR, TokenCost, cluster_cost, usd_per_million_tokens
from slowlink.cost.prices import load_prices
from slowlink.errors import SpecError
from slowlink.spec.cluster import load_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PRICES = load_prices()


def test_superpod_capex_adds_up_from_the_book() -> None:
    c = cluster_cost(load_cluster(EXAMPLES / "cost-superpod-1su.yaml"), PRICES)
    server, switch = PRICES.server("h100-sxm"), PRICES.switch("infiniband", 400, 64)
    mmf = PRICES.medium("mmf")
    assert c.capex_usd["servers"] == 31 * server.price_usd
    assert c.capex_usd["nics"] == 248 * PRICES.nic(400).price_usd
    assert c.capex_usd["switches"] == 12 * switch.price_usd
    assert c.capex_usd["optics"] == 2 * 508 * mmf.price_usd
    assert c.capex_usd["cables"] == 508 * mmf.fiber_usd
    spares = PRICES.facility.network_spares_fraction
    assert c.capex_usd["spares"] == pytest.approx(spares * (12 * switch.price_usd + 2 * 508 * mmf.price_usd
                                                            + 508 * mmf.fiber_usd))
    assert c.network_share == pytest.approx(1 - c.capex_usd["servers"] / c.total_capex_usd)
    assert c.it_power_w == 31 * server.power_w + 12 * switch.power_w + 2 * 508 * mmf.power_w
    fac = PRICES.facility
    hourly = c.total_capex_usd / (fac.depreciation_years * HOURS_PER_YEAR) + c.it_power_w * fac.pue / 1e3 * \
        fac.usd_per_kwh
    assert c.usd_per_hour == pytest.approx(hourly)
    assert c.usd_per_gpu_hour == pytest.approx(hourly / 248)


def test_cost_per_token_and_the_ettr_seam() -> None:
    assert usd_per_million_tokens(3600.0, 1e6) == pytest.approx(1.0)
    assert usd_per_million_tokens(3600.0, 1e6, ettr=0.5) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="ettr"):
        usd_per_million_tokens(1.0, 1.0, ettr=0.0)
    c = cluster_cost(load_cluster(EXAMPLES / "cost-superpod-1su.yaml"), PRICES)
    tc = TokenCost(c, tokens_per_s=1e6, step_time_s=1.0, priced_ettr=0.5)
    assert tc.usd_per_million_tokens == pytest.approx(c.usd_per_hour / 3600.0 * 2.0)


def test_fewest_tiers_that_fit() -> None:
    one_k = build_design(Design("h100-sxm", 128, 8, 400, "infiniband", "fat-tree", 1.0), PRICES)
    eight_k = build_design(Design("h100-sxm", 1024, 8, 400, "infiniband", "fat-tree", 1.0), PRICES)
    assert (one_k.fabric.tiers, eight_k.fabric.tiers) == (2, 3)
    with pytest.raises(SpecError, match="no 3-tier fabric"):
        build_design(Design("h100-sxm", 2 ** 14, 8, 400, "infiniband", "fat-tree", 1.0), PRICES)


def test_network_share_table_shape() -> None:
    rows = {(name, gpus): cost for name, gpus, cost in network_share_table(PRICES)}
    for name in {n for n, _ in rows}:
        # a third tier (8k) costs more network per GPU than two (1k); a full 3-tier tree is then flat in scale
        assert rows[(name, 8192)].network_share > rows[(name, 1024)].network_share
    for gpus in (1024, 8192, 32768):
        assert rows[("RoCE 400G rail-optimized 2:1", gpus)].network_share < \
            rows[("RoCE 400G rail-optimized 1:1", gpus)].network_share
    ib = rows[("IB NDR fat tree 1:1", 8192)].bom
    # k = 64 by hand: 8,192 NICs / 32 per leaf = 256 leaves, 8 pods x 32 aggregation, 8,192 uplinks / 64 cores
    assert ib.switches == {"leaf": 256, "spine": 256, "core": 128}
