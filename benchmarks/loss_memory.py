"""Peak bytes per logit of two losses' forward + backward, measured with PyTorch on this machine's CPU, against
:func:`slowlink.workload.memory.logits_bytes`.

  megatron  Megatron-Core core_r0.10.0's eager vocab-parallel cross-entropy, its ops re-enacted as
            ``benchmarks/fused_cross_entropy_bytes.py`` runs them (imported from there), with the lifetimes of
            ``GPTModel.forward``: the bf16 logits live until the loss's forward returns, its fp32 copy is worked
            in place and kept for the backward, whose gradient is cast back to bf16 beside it.
  gathered  Aleph Alpha's scaling loss: ``torch.nn.functional.cross_entropy`` over ``.float()`` of the gathered
            bf16 logits, forward and backward through autograd, with the previous micro-batch's gathered logits
            held beside them (the pipeline's second stage-output buffer).

Peak = the process's peak resident set (``ru_maxrss``) minus its resident set before the logits exist, each case
in a fresh process. The tensors are 128 MiB and more, above glibc's largest mmap threshold (32 MiB), so each is
its own mapping, returned to the system when freed: the peak follows the tensors alive at once. tp = 1; the shapes
are those of a Llama 3 row cut to fit here (2048 tokens x 32768 vocabulary).

Run as ``python benchmarks/loss_memory.py``; prints one JSON object (per case: measured and modelled bytes per
logit); exits 1 when a case is off the model by more than 5%. Needs torch (the ``bench`` extra).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

TOKENS, VOCAB = 2048, 32768
CASES = ("megatron", "gathered")
TOLERANCE = 0.05


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def measure(case: str) -> float:
    """Peak bytes per logit of ``case`` above the resident set before its logits exist (run in a fresh process)."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fused_cross_entropy_bytes import _grad, _loss, _max, _predicted  # before the baseline: torch.compile's imports

    torch.set_num_threads(1)
    target = torch.randint(0, VOCAB, (TOKENS,))
    base = _resident_bytes()
    if case == "megatron":
        logits = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16)
        x, mx = _max(logits)
        mask, mt1, ps, e = _predicted(x, target, mx, 0, VOCAB)
        sm, loss = _loss(e, ps)
        del logits, x, e  # GPTModel.forward returns the loss: its logits go; the loss keeps its fp32 softmax
        grad = _grad(sm, torch.ones_like(loss), mask, mt1, False).to(torch.bfloat16)
        del grad
    elif case == "gathered":
        previous = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16)  # the other stage-output buffer
        logits = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16).requires_grad_()
        loss = torch.nn.functional.cross_entropy(logits.float(), target, reduction="none").sum()
        loss.backward()
        del previous
    else:
        raise ValueError(f"case ({case!r}) must be one of {', '.join(CASES)}")
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base) / (TOKENS * VOCAB)


def modelled(case: str) -> float:
    """:func:`~slowlink.workload.memory.logits_bytes` per logit for the same shapes (bf16, tp 1, one sequence)."""
    from slowlink.spec.workload import workload_from_mapping
    from slowlink.workload.memory import logits_bytes

    w = workload_from_mapping({
        "model": {"preset": "llama3-8b", "vocab": VOCAB, "seq_len": TOKENS},
        "training": {"global_batch": 1, "micro_batch": 1, "precision": "bf16", "cross_entropy": case},
        "parallel": {"tp": 1, "pp": 1, "dp": 1}})
    return logits_bytes(w) / (TOKENS * VOCAB)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        print(measure(sys.argv[2]))
        return 0
    import torch

    result: dict[str, object] = {"torch": torch.__version__, "tokens": TOKENS, "vocab": VOCAB}
    ok = True
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--case", case], check=True, capture_output=True, text=True)
        got, want = float(out.stdout), modelled(case)
        ok &= abs(got / want - 1.0) <= TOLERANCE
        result[case] = {"measured_bytes_per_logit": round(got, 2), "modelled_bytes_per_logit": want}
    print(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
