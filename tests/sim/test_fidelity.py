"""The one fidelity dispatch and the checked collective query (issue 19, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowlink.collectives import predict
from slowlink.errors import SpecError
from slowlink.sim.fidelity import CollectiveQuery, check_fidelity, comm_cost, predict_collective
from slowlink.spec.cluster import load_cluster

REF = Path(__file__).parents[2] / "examples" / "ref-64gpu.yaml"


def _q(**kw: object) -> CollectiveQuery:
    opts: dict[str, object] = {"op": "all_reduce", "size": None, "sweep": None, "minbytes": None,
                               "maxbytes": None, "stepfactor": None}
    opts.update(kw)
    return CollectiveQuery.from_options(**opts)  # type: ignore[arg-type]


def test_nccl_tests_flags_give_the_same_sizes_as_a_sweep() -> None:
    assert _q(minbytes="8", maxbytes="1MiB", stepfactor=4.0).sizes == _q(sweep="8:1MiB:4").sizes
    assert _q(minbytes="1MiB", maxbytes="8MiB").sizes == (2**20, 2**21, 2**22, 2**23)  # -f defaults to 2
    assert _q(maxbytes="64MiB").sizes == (2**26,)


@pytest.mark.parametrize(("kw", "needle"), [
    ({}, "give exactly one of --size"),
    ({"size": "1MiB", "sweep": "8:64:2"}, "got --size, --sweep"),
    ({"size": "1MiB", "minbytes": "8"}, "got --size, -b/-e/-f"),
    ({"minbytes": "1GiB", "maxbytes": "1MiB"}, "-b/-e/-f"),
    ({"size": "3B"}, "must be >= one float element (4 B)"),
    ({"size": "1MiB", "dtype": "float7"}, "-d/--datatype ('float7')"),
    ({"size": "1MiB", "op": "allreduce"}, "op ('allreduce') is not a collective"),
    ({"size": "1MiB", "fidelity": "exact"}, "--fidelity ('exact') must be one of analytical, flow"),
    ({"size": "1MiB", "algorithm": "rings"}, "--algorithm ('rings') must be one of"),
    ({"size": "1MiB", "protocol": "ll"}, "--protocol ('ll') must be one of LL, LL128, Simple"),
    ({"size": "1MiB", "protocol": "LL", "fidelity": "flow"}, "--protocol applies to --fidelity analytical"),
])
def test_every_bad_option_names_its_flag(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        _q(**kw)
    assert needle in str(exc.value)


def test_forcing_an_algorithm_and_protocol_matches_the_model() -> None:
    c = load_cluster(REF)
    (got,) = predict_collective(c, _q(size="64MiB", algorithm="tree", protocol="LL128"))
    want = predict(c, "all_reduce", 64 * 2**20, algorithm="tree", protocol="LL128")
    assert (got.algorithm, got.protocol, got.time_s) == ("tree", "LL128", want.time_s)
    assert "as forced" in got.reason


def test_flow_and_analytical_answer_in_one_type() -> None:
    c = load_cluster(REF)
    ana = predict_collective(c, _q(size="256MiB", ranks=16))
    flow = predict_collective(c, _q(size="256MiB", ranks=16, fidelity="flow"))
    assert type(ana[0]) is type(flow[0]) and ana[0].ranks == flow[0].ranks == 16
    assert flow[0].time_s == pytest.approx(ana[0].time_s, rel=0.25)


def test_ranks_outside_the_cluster_are_refused() -> None:
    with pytest.raises(SpecError, match=r"--ranks \(65\) must be between 1 and the cluster's GPUs"):
        predict_collective(load_cluster(REF), _q(size="1MiB", ranks=65))


def test_comm_cost_is_none_for_the_analytical_default() -> None:
    c = load_cluster(REF)
    assert comm_cost("analytical", c) is None
    assert callable(comm_cost("flow", c))
    with pytest.raises(SpecError):
        check_fidelity("Flow")
