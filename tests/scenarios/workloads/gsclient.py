"""The scenario workloads' way to talk to gpuscope: the real Python client (clients/python/gpuscope),
which the scenario harness (scenlib.py) always puts on PYTHONPATH. There is no stand-in: a workload
that cannot import the real client fails at its first line, so a scenario can only pass on the
client users run. A workload calls watch(loader), param(**kv) and mark(name, value); without
GPUSCOPE_SOCKET each is a no-op (the client's own rule)."""
from gpuscope import mark, param, watch  # noqa: F401
