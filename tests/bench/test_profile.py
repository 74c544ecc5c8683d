"""bench train --profile: the kernel-class rules, idle from busy intervals, and one real profiled CPU run."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from slowlink.bench.profile import CLASSES, Record, breakdown, classify, records_of, union_s
from slowlink.cli.main import app
from slowlink.errors import BenchError

runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "examples"
TINY = ["--layers", "1", "--hidden", "32", "--heads", "2", "--ffn-hidden", "64", "--vocab", "64", "--seq-len", "16",
        "--batch", "2", "--steps", "2", "--warmup-steps", "1"]


@pytest.mark.parametrize(("name", "cls"), [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__"
     "5x_cublas", "gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn", "gemm"),
    ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)", "gemm"),
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopA_TNT", "gemm"),
    ("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(cublasSplitKParams<float>)", "gemm"),
    ("aten::addmm", "gemm"), ("aten::mm", "gemm"), ("aten::bmm", "gemm"), ("aten::linear", "gemm"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>(Flash_fwd_params)",
     "attention"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(Params)",
     "attention"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)", "attention"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(...)>", "elementwise"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(...)",
     "elementwise"),
    ("Memcpy DtoD (Device -> Device)", "elementwise"), ("aten::native_layer_norm", "elementwise"),
    ("aten::_to_copy", "elementwise"), ("aten::copy_", "elementwise"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...FusedOptimizerTensorListMetadata...>",
     "optimizer"),
    ("aten::view", "other"), ("aten::t", "other"), ("aten::empty_strided", "other"),
    ("some_custom_kernel_nobody_knows", "other"),
])
def test_kernel_and_op_names_are_classed(name: str, cls: str) -> None:
    assert classify(name) == cls


def test_anything_inside_optimizer_step_is_optimizer() -> None:
    assert classify("aten::mul_", in_optimizer=True) == "optimizer"
    assert classify("aten::mul_") == "elementwise"


def test_union_counts_overlapping_kernels_on_two_streams_once() -> None:
    assert union_s([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == pytest.approx(4.0)
    assert union_s([]) == 0.0


def test_device_idle_is_wall_minus_the_busy_union() -> None:
    recs = [Record("ampere_bf16_s16816gemm_x", 0.0, 4.0, 4.0, False),  # stream 7
            Record("pytorch_flash::flash_fwd_kernel", 3.0, 5.0, 2.0, False),  # stream 13, overlaps 1 s
            Record("vectorized_elementwise_kernel", 6.0, 7.0, 1.0, False),
            Record("multi_tensor_apply_kernel", 7.0, 7.5, 0.5, True),
            Record("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(...)>",
                   6.5, 6.7, 0.2, False)]  # inside the elementwise kernel's interval: busy once
    out = breakdown(recs, wall_s=10.0, steps=2, device_kernels=True)
    assert out["gemm_s"] == 2.0 and out["attention_s"] == 1.0 and out["elementwise_s"] == pytest.approx(0.6)
    assert out["elementwise_copy_s"] == pytest.approx(0.1)  # the cast, counted inside elementwise
    assert out["optimizer_s"] == 0.25 and out["other_s"] == 0.0
    assert out["idle_s"] == pytest.approx((10.0 - 6.5) / 2) and out["wall_s"] == 5.0  # busy 0-5, 6-7.5
    cpu = breakdown(recs, wall_s=10.0, steps=2, device_kernels=False)  # CPU: self times add, no union
    assert cpu["idle_s"] == pytest.approx((10.0 - 7.7) / 2)


def _ev(name: str, kind: str, start_us: float, end_us: float, **kw: object) -> SimpleNamespace:
    return SimpleNamespace(name=name, device_type=SimpleNamespace(name=kind),
                           time_range=SimpleNamespace(start=start_us, end=end_us), **kw)


def test_a_kernel_launched_from_optimizer_step_is_optimizer() -> None:
    scope = _ev("Optimizer.step#AdamW.step", "CPU", 0, 100, id=1, cpu_parent=None, linked_correlation_id=0)
    op = _ev("aten::add_", "CPU", 10, 20, id=2, cpu_parent=scope, linked_correlation_id=0)
    fwd = _ev("aten::add", "CPU", 200, 210, id=3, cpu_parent=None, linked_correlation_id=0)
    k1 = _ev("void at::native::vectorized_elementwise_kernel<4>", "CUDA", 30, 40, linked_correlation_id=2)
    k2 = _ev("void at::native::vectorized_elementwise_kernel<4>", "CUDA", 220, 230, linked_correlation_id=3)
    recs = records_of([scope, op, fwd, k1, k2], "cuda:0")
    assert [(r.in_optimizer, r.self_s) for r in recs] == [(True, pytest.approx(1e-5)), (False, pytest.approx(1e-5))]
    with pytest.raises(BenchError, match=r"--profile \(device cuda:0\): the profiler recorded no device kernels"):
        records_of([scope, op], "cuda:0")


@pytest.mark.slow
def test_train_profile_on_cpu_splits_the_step_and_sets_it_against_plan(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    for name in ("bench-localhost.yaml", "bench-cpu-catalog.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    res = runner.invoke(app, ["bench", "train", "--nproc", "1", *TINY, "--precision", "fp32", "--profile",
                              "--cluster", str(tmp_path / "bench-localhost.yaml"), "--json",
                              "--results", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    prof = row["profile"]
    classes = sum(prof[f"{c}_s"] for c in CLASSES)
    assert prof["gemm_s"] > 0 and prof["attention_s"] > 0 and prof["optimizer_s"] > 0
    assert 0 < prof["elementwise_copy_s"] <= prof["elementwise_s"]  # fp32: reshapes of transposed views copy
    tol = 1e-5 * prof["wall_s"]  # --json prints 6 significant digits
    assert classes <= prof["wall_s"] + tol and prof["idle_s"] == pytest.approx(prof["wall_s"] - classes, abs=tol)
    model = row["plan"]["profile"]
    # the model's classes add up to what plan prices for the compute-only step on one rank
    assert model["wall_s"] == pytest.approx(row["plan"]["compute_s"] + model["optimizer_s"], rel=1e-5)
    assert row["plan"]["profile_diff"]["gemm_s"] == pytest.approx(prof["gemm_s"] - model["gemm_s"],
                                                                  abs=1e-5 * (prof["gemm_s"] + model["gemm_s"]))
    (record,) = (tmp_path / "out").glob("*.json")
    assert json.loads(record.read_text())["rows"][0]["profile"]["gemm_s"] == pytest.approx(prof["gemm_s"], rel=1e-5)
    table = runner.invoke(app, ["bench", "train", "--nproc", "1", *TINY, "--precision", "fp32", "--profile",
                                "--no-results"])
    assert table.exit_code == 0 and "compute-only step by kernel class" in table.output
    assert "of which copies, casts" in table.output


def test_profile_needs_timed_steps() -> None:
    res = runner.invoke(app, ["bench", "train", "--nproc", "1", *TINY[:-4], "--steps", "0", "--profile"])
    assert res.exit_code == 2 and "--steps (0) must be >= 1" in res.output and "Traceback" not in res.output


def test_a_record_with_a_broken_profile_is_refused() -> None:
    from slowlink.bench.record import TrainRow, check_record
    from slowlink.errors import SpecError

    prof = dict.fromkeys((f"{c}_s" for c in (*CLASSES, "idle", "elementwise_copy")), 0.1) | {"wall_s": 1.0}
    row = {"mode": "ddp", "ranks": 1, "step_time_s": 1.0, "profile": prof}
    checked = check_record([row], "r.json").rows[0]
    assert isinstance(checked, TrainRow) and checked.profile is not None and checked.profile.gemm_s == 0.1
    with pytest.raises(SpecError, match="profile"):
        check_record([row | {"profile": prof | {"idle_s": -0.5}}], "r.json")
