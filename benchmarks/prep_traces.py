"""Benchmark ``prep-traces`` on a dump of the real GreenHub size, against a naive pandas baseline.

    PYTHONPATH=. python benchmarks/prep_traces.py                       # 70 parts, 49,296,315 rows
    PYTHONPATH=. python benchmarks/prep_traces.py --parts 7 --rows 4929631 --baseline-rows 1000000
    PYTHONPATH=. python benchmarks/prep_traces.py --smoke      # seconds: 20,000 rows, in a temporary folder

1. Generates a Kaggle-layout dump (``samples/part-NNNN.parquet``, 38 columns, snappy) of
   ``--rows`` rows in ``--parts`` parts, in server-insert order: about 300k devices as in the
   real dump (a few thousand long-lived devices simulated by :mod:`flamingo_sim.traces.synth`,
   and many devices with a day or two of samples), with the dump's quirks (1970 clocks at the
   start of part-0000, 0.5 % re-uploaded duplicates, levels of 255, millivolt voltages, nulls).
2. Times ``flamingo-sim prep-traces`` on it in a subprocess (wall time, peak RSS).
3. Times, on the first parts holding ``--baseline-rows`` rows, a straightforward pandas version:
   read every column, clean, sort, then ``groupby('device_id').apply`` computing the criteria
   and PCHIP-resampling each passing device.

Prints a JSON summary (also written to ``WORKDIR/bench.json``) and the ratio line. Targets (2 cores): full dump in
<= 180 s with peak RSS <= 4 GB, and >= 10x the baseline's rows/s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from flamingo_sim.rng import rng
from flamingo_sim.traces.clock import utc_to_lisbon_wall
from flamingo_sim.traces.synth import kind_of, simulate_device

REAL_ROWS = 49_296_315
REAL_PARTS = 70
REAL_DEVICES = 300_000
# --smoke: the same three steps on a tiny dump in a temporary folder; explicit options still win
SMOKE = {"parts": 2, "rows": 20_000, "baseline_rows": 5_000, "pool": 12}


def generate(out: Path, n_rows: int, n_parts: int, seed: int = 0, pool_size: int = 300) -> None:
    """Write a Kaggle-layout dump of ``n_rows`` rows in ``n_parts`` parts under ``out/samples``."""
    r = rng(seed, "bench")
    pool = [simulate_device(i, kind_of(i), seed) for i in range(pool_size)]
    p_len = np.array([d.ts_s.size for d in pool])
    p_start = np.r_[0, np.cumsum(p_len)[:-1]]
    cat = {k: np.concatenate([getattr(d, k) for d in pool]) for k in ("ts_s", "level", "screen_on", "charging", "temperature_c", "voltage_v")}
    cat["ts_s"] = cat["ts_s"] - np.repeat(np.array([d.ts_s.min() for d in pool]), p_len)  # relative time

    n_dup = n_rows // 200
    n_target = n_rows - n_dup
    n_devices = max(1, int(REAL_DEVICES * n_rows / REAL_ROWS))
    # ~64 % of rows from long-lived devices (whole pool traces), the rest from short ones.
    long_rows = int(0.64 * n_target)
    reps_pool, reps_first, reps_n = [], [], []
    total = 0
    while total < long_rows:
        p = int(r.integers(pool_size))
        n = int(min(p_len[p], long_rows - total))
        reps_pool.append(p), reps_first.append(0), reps_n.append(n)
        total += n
    n_short = max(1, n_devices - len(reps_pool))
    short_rows = n_target - total
    sizes = np.maximum(1, r.multinomial(short_rows - n_short, np.full(n_short, 1.0 / n_short)) + 1)
    sp = r.integers(pool_size, size=n_short)
    sizes = np.minimum(sizes, p_len[sp])
    first = (r.random(n_short) * (p_len[sp] - sizes)).astype(np.int64)
    reps_pool = np.r_[np.array(reps_pool, dtype=np.int64), sp]
    reps_first = np.r_[np.array(reps_first, dtype=np.int64), first]
    reps_n = np.r_[np.array(reps_n, dtype=np.int64), sizes]
    n_rep = reps_pool.size
    rep_offset = 1514764800 + r.integers(0, 700 * 86400, n_rep)  # 2018..2019
    rep_id = r.permutation(n_rep).astype(np.int64) + 1

    n_real = int(reps_n.sum())
    rep_of_row = np.repeat(np.arange(n_rep, dtype=np.int32), reps_n)
    src = np.arange(n_real, dtype=np.int64) - np.repeat(np.r_[0, np.cumsum(reps_n)[:-1]], reps_n)
    src += np.repeat(p_start[reps_pool] + reps_first, reps_n)
    # duplicates (re-uploads) and padding to exactly n_rows
    extra = r.integers(0, n_real, n_rows - n_real)
    rep_of_row = np.r_[rep_of_row, rep_of_row[extra]]
    src = np.r_[src, src[extra]]
    ts = cat["ts_s"][src] + rep_offset[rep_of_row]
    upload = ts + r.integers(0, 3 * 86400, ts.size)
    upload[n_real:] += 5 * 86400
    order = np.argsort(upload, kind="stable")
    del upload

    samples = out / "samples"
    samples.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, n_rows, n_parts + 1).astype(np.int64)
    strings = {
        "battery_state": ["Charging", "Discharging", "Full", "charging", "discharging"],
        "timezone": ["Europe/Lisbon", "America/New_York", "Asia/Tokyo", "Europe/Berlin"],
        "country_code": ["pt", "us", "jp", "de", "Unknown"],
        "health": ["Good", "Overheat"],
        "network_status": ["connected", "disconnected"],
        "network_type": ["WIFI", "wifi", "lte", "LTE"],
        "mobile_network_type": ["lte", "hspa"],
        "mobile_data_status": ["connected", "disconnected"],
        "mobile_data_activity": ["none", "in", "out"],
        "wifi_status": ["enabled", "disabled"],
    }
    for p in range(n_parts):
        rows = order[bounds[p] : bounds[p + 1]]
        m = rows.size
        s, rep = src[rows], rep_of_row[rows]
        t = ts[rows].copy()
        if p == 0:
            t[: min(2000, m)] = r.integers(0, 86400 * 30, min(2000, m))  # 1970 clocks first
        level = cat["level"][s].copy()
        level[r.random(m) < 0.001] = 255.0
        volt = cat["voltage_v"][s] * np.where(rep_id[rep] % 5 == 0, 1000.0, 1.0)
        charging = cat["charging"][s]
        null = pa.array(r.random(m) < 0.004)
        cols = {
            "id": pa.array(np.arange(bounds[p], bounds[p + 1], dtype=np.int64) + 1),
            "device_id": pa.array(rep_id[rep]),
            "timestamp": pa.array(utc_to_lisbon_wall(t) * 1_000_000, type=pa.timestamp("us")),
            "battery_level": pa.array(level),
        }
        for name, values in strings.items():
            cols[name] = pc.take(pa.array(values), pa.array(r.integers(0, len(values), m)))
        for name in ("memory_active", "memory_inactive", "memory_free", "memory_user"):
            cols[name] = pa.array(r.integers(100_000, 4_000_000, m))
        cols["charger"] = pc.if_else(pa.array(charging), "ac", "unplugged")
        cols["voltage"] = pc.if_else(null, pa.scalar(None, pa.float64()), pa.array(volt))
        cols["temperature"] = pc.if_else(null, pa.scalar(None, pa.float64()), pa.array(cat["temperature_c"][s]))
        cols["screen_on"] = pa.array(cat["screen_on"][s].astype(np.int64))
        for name in ("usage", "up_time", "sleep_time", "wifi_signal_strength", "wifi_link_speed", "roaming_enabled",
                     "bluetooth_enabled", "location_enabled", "power_saver_enabled", "nfc_enabled", "developer_mode",
                     "free", "total", "free_system", "total_system"):
            cols[name] = pa.array(np.round(r.random(m) * 100, 1))
        cols["screen_brightness"] = pa.array(r.integers(-1, 256, m))
        pq.write_table(pa.table(cols), samples / f"part-{p:04d}.parquet", compression="snappy")
        print(f"generated part {p + 1}/{n_parts}", file=sys.stderr, flush=True)


def run_prep(dump: Path, out: Path) -> dict[str, float]:
    """Time ``flamingo-sim prep-traces`` in a child process; peak RSS from getrusage."""
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", "prep-traces", str(dump), "--out", str(out)],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"prep-traces failed: {proc.stderr.strip()}")
    rss_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    report = json.loads((out / "report.json").read_text())
    return {"wall_s": wall, "peak_rss_gb": rss_gb, "rows": report["rows"]["read"], "rows_per_s": report["rows"]["read"] / wall,
            "devices_seen": report["devices"]["seen"], "devices_passing": report["devices"]["passing_all"]}


def baseline(files: list[Path], n_rows: int) -> dict[str, float]:
    """The straightforward pandas version on the first ``n_rows`` rows of ``files``."""
    import pandas as pd
    from scipy.interpolate import PchipInterpolator

    t0 = time.perf_counter()
    frames, got = [], 0
    for f in files:
        df = pd.read_parquet(f)  # every column
        frames.append(df.iloc[: n_rows - got])
        got += len(frames[-1])
        if got >= n_rows:
            break
    df = pd.concat(frames, ignore_index=True)
    df = df[(df["timestamp"] >= "2017-10-15") & (df["timestamp"] <= pd.Timestamp.now())]
    df = df[(df["battery_level"] >= 0) & (df["battery_level"] <= 100)]
    df = df.drop_duplicates(["device_id", "timestamp"]).sort_values(["device_id", "timestamp"])

    def per_device(g: pd.DataFrame) -> pd.DataFrame | None:
        t = g["timestamp"].astype("int64").to_numpy() // 10**6
        span = (t[-1] - t[0]) / 86400
        gaps = np.diff(t)
        ok = span >= 28 and len(t) / max(span, 1e-9) >= 100 and (gaps.max(initial=0) <= 86400) and (gaps > 6 * 3600).sum() <= 15
        if not ok or len(t) < 2:
            return None
        grid = np.arange(-(-t[0] // 600) * 600, t[-1] + 1, 600)
        lv = np.clip(PchipInterpolator(t, g["battery_level"].to_numpy())(grid), 0, 100)
        return pd.DataFrame({"timestamp": grid, "battery_level_pct": lv, "battery_state": np.sign(np.r_[np.diff(lv), 0])})

    out = df.groupby("device_id").apply(per_device)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "rows": got, "rows_per_s": got / wall, "devices": int(df["device_id"].nunique()), "out_rows": len(out)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=REAL_PARTS)
    ap.add_argument("--rows", type=int, default=REAL_ROWS)
    ap.add_argument("--baseline-rows", type=int, default=5_000_000)
    ap.add_argument("--pool", type=int, default=300, help="simulated long-lived devices the dump's rows are drawn from")
    ap.add_argument("--workdir", type=Path, help="where the dump and the output go (default /tmp/flamingo-bench; --smoke: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="reuse a dump already generated in --workdir")
    ap.add_argument("--smoke", action="store_true", help=f"tiny sizes, seconds ({SMOKE})")
    args = ap.parse_args(argv)
    if args.smoke:
        ap.set_defaults(**SMOKE)
        args = ap.parse_args(argv)
    if args.workdir is None and args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            bench(args, Path(tmp))
    else:
        bench(args, args.workdir or Path("/tmp/flamingo-bench"))


def bench(args: argparse.Namespace, workdir: Path) -> None:
    dump = workdir / "dump"
    res: dict[str, object] = {"parts": args.parts, "rows": args.rows, "cpus": os.cpu_count()}
    if not (args.reuse and (dump / "samples").is_dir()):
        t0 = time.perf_counter()
        generate(dump, args.rows, args.parts, pool_size=args.pool)
        res["generate_s"] = time.perf_counter() - t0
    res["dump_bytes"] = sum(f.stat().st_size for f in (dump / "samples").glob("*.parquet"))
    prep = run_prep(dump, workdir / "out")
    files = sorted((dump / "samples").glob("part-*.parquet"))
    base = baseline(files, args.baseline_rows)
    res.update(prep_traces=prep, baseline=base, speedup_rows_per_s=prep["rows_per_s"] / base["rows_per_s"])
    text = json.dumps(res, indent=2)
    (workdir / "bench.json").write_text(text + "\n")
    print(text)
    print(f"prep-traces {prep['rows_per_s']:,.0f} rows/s, pandas baseline {base['rows_per_s']:,.0f} rows/s: "
          f"ratio {res['speedup_rows_per_s']:.1f}x")


if __name__ == "__main__":
    main()
