"""gpuscope.Store's tables as pandas DataFrames (Table.to_pandas), with the real pandas (Debian's
python3-pandas; a skip where it is not installed, and under make check, which installs it, a
failure): a run's step series read back has a row per stored point, with their values."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F401,F403

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import gpuscope  # noqa: E402

try:
    import pandas
except ImportError:
    skip_script("pandas is not installed (Debian python3-pandas)")


def test_series_to_pandas():
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "frame", "--", *sb.step_job(0.002, 0.002, 20))
        os.environ["GPUSCOPE_BIN"] = os.path.abspath(BIN)
        st = gpuscope.Store(sb.store)
        rows = st.series("frame", "step.total_s")
        check(len(rows) >= 19, f"rows: {len(rows)}")
        df = rows.to_pandas()
        check(isinstance(df, pandas.DataFrame) and len(df) == len(rows), "a DataFrame of every row")
        check(list(df["value"]) == [r["value"] for r in rows], "the DataFrame's values")
        check(len(st.runs().to_pandas()) == 1, "the runs as a DataFrame")
    finally:
        sb.close()


run_tests(globals())
