"""``python -m slowlink``: the same CLI as the ``slowlink`` script (handy with PYTHONPATH=src in a checkout)."""

from slowlink.cli.main import run

run()
