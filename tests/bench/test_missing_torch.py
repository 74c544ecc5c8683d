import sys

import pytest

from slowlink.bench.collectives import require_torch
from slowlink.errors import BenchError


def test_missing_torch_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BenchError, match=r"pip install 'slowlink\[bench\]'"):
        require_torch()
