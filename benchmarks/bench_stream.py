"""Issue 15, streaming: a synthetic LIBSVM file larger than the memory the run may use.

``python benchmarks/bench_stream.py generate DIR --gigabytes 5`` writes, from a fixed seed,
``DIR/big.svm`` (at least that many GB), ``DIR/test.svm`` (100 000 rows from another
seed, the same distribution) and ``DIR/sub.svm`` (the first ``--sub-rows`` rows of
big.svm: a uniform subsample, the rows being independent). Rows: 100 features, each
present with probability 1/2, values N(0, 1) rounded to one decimal; the label is the sign
of a fixed linear score plus noise, about 28% positive. Lines are written with fixed-width
tokens (padding spaces, which LIBSVM allows) so that the text is built by table lookups,
at disk speed.

``python benchmarks/bench_stream.py run DIR`` then times, each command in its own
process under a memory limit (``--limit-mb``, default 1024: ``RLIMIT_DATA``, the private
writable memory the process may hold) with its peak RSS from ``wait4``:
``calopt convert big.svm big.cal``, ``calopt train big.cal`` (streamed), and the in-memory
``calopt train sub.svm`` (without the limit), all tested on test.svm; ``--text`` also
streams big.svm itself. Results go to ``benchmarks/results/stream.json``.

``python benchmarks/bench_stream.py epochs DIR [--epochs 3] [--batch-size B ...] [--repeat R]
[--compare]`` (issue 25: "epochs of SPADE/STAMP at 10⁷ rows within 3× the read-bandwidth
bound") times, in one process with one BLAS thread, on a ``.npy`` directory (``X.npy``,
``y.npy``: the size benchmark's ``mmap-10m/train``), the read bound — X read once from the page
cache, the faster of a sum over each 32 MB block of the memory map and one sum over the whole
map, best of 3, read again before each fit — and each epoch of ``calopt.fit(open_stream(DIR),
algorithm=A, measure=M, epochs=E, select="none")`` for SPADE (Q-mean) and STAMP (F1) at fit's
default batch size (or each ``--batch-size``), from the fit's history (the loop's own seconds;
the survey, step trial and threshold passes apart). ``--compare`` also runs each fit with the
rows copied through the shuffle pool (the route before the epoch gathered them from the
mapping), alternating. Results go to ``benchmarks/results/stream_epochs.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

D = 100
LEVELS = np.round(np.arange(-99, 100) / 10, 1)  # values -9.9 .. 9.9
WIDTH = 9  # " 100:-9.9"
BLOCK_ROWS = 100_000
RESULTS = Path(__file__).resolve().parent / "results" / "stream.json"


def _token_table() -> np.ndarray:
    """(D·len(LEVELS) + 1, WIDTH) bytes: " j:v" right-aligned per feature and level; the last row blank."""
    tokens = [f" {j + 1}:{v:.1f}".rjust(WIDTH).encode() for j in range(D) for v in LEVELS]
    tokens.append(b" " * WIDTH)
    return np.frombuffer(b"".join(tokens), dtype=np.uint8).reshape(-1, WIDTH)


def _model(seed: int) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng([seed, 0])
    w = rng.normal(size=D) / np.sqrt(D / 2)
    pilot = _scores(np.random.default_rng([seed, 1]), 200_000, w)[0]
    return w, float(np.quantile(pilot, 0.72))


def _scores(rng: np.random.Generator, rows: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values = np.clip(np.round(rng.normal(size=(rows, D)), 1), -9.9, 9.9)
    present = rng.random(size=(rows, D)) < 0.5
    X = np.where(present, values, 0.0)
    return X @ w + 0.5 * rng.normal(size=rows), np.where(present, np.round(values * 10).astype(np.int64) + 99, -1)


def _lines(rng: np.random.Generator, rows: int, w: np.ndarray, threshold: float, table: np.ndarray) -> bytes:
    scores, levels = _scores(rng, rows, w)
    cells = np.where(levels >= 0, np.arange(D) * len(LEVELS) + levels, len(table) - 1)
    text = np.empty((rows, 2 + D * WIDTH + 1), dtype=np.uint8)
    text[:, :2] = np.where(scores[:, None] > threshold, np.frombuffer(b"+1", np.uint8), np.frombuffer(b"-1", np.uint8))
    text[:, 2:-1] = table[cells].reshape(rows, D * WIDTH)
    text[:, -1] = ord("\n")
    return text.tobytes()


def generate(directory: Path, gigabytes: float, sub_rows: int, seed: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    table, (w, threshold) = _token_table(), _model(seed)
    row_bytes = 2 + D * WIDTH + 1
    rows = int(np.ceil(gigabytes * 1e9 / row_bytes / BLOCK_ROWS)) * BLOCK_ROWS
    started = time.perf_counter()
    rng = np.random.default_rng([seed, 2])
    with open(directory / "big.svm", "wb") as big, open(directory / "sub.svm", "wb") as sub:
        for start in range(0, rows, BLOCK_ROWS):
            block = _lines(rng, BLOCK_ROWS, w, threshold, table)
            big.write(block)
            if start < sub_rows:
                sub.write(block[:min(BLOCK_ROWS, sub_rows - start) * row_bytes])
    test_rng = np.random.default_rng([seed, 3])
    with open(directory / "test.svm", "wb") as test:
        test.write(_lines(test_rng, BLOCK_ROWS, w, threshold, table))
    print(f"{rows:,} rows, {os.path.getsize(directory / 'big.svm') / 1e9:.2f} GB in "
          f"{time.perf_counter() - started:.0f} s")


def _timed(argv: list[str], limit_mb: int | None) -> dict:
    """Run ``argv`` (its JSON on stdout), its wall time and peak RSS, under an address-space limit."""
    def limit() -> None:
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_DATA, (limit_mb << 20, limit_mb << 20))

    started = time.perf_counter()
    # RLIMIT_DATA bounds the private writable memory (heap, NumPy's arrays, anonymous maps), not
    # the code of the shared libraries: with them, RLIMIT_AS starts at 580 MB of mostly
    # unused address space. glibc reserves 64 MB per thread arena and OpenBLAS a buffer per
    # thread, reserved rather than used: two arenas and one BLAS thread.
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "OPENBLAS_NUM_THREADS": "1"}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit, env=env)
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the largest child so far: run one at a time
    result = {"argv": " ".join(argv), "exit_code": process.returncode, "seconds": round(seconds, 1),
              "peak_rss_mb_children_max": round(usage.ru_maxrss / 1024), "limit_mb": limit_mb,
              "limit_kind": "RLIMIT_DATA" if limit_mb else None}
    if process.returncode:
        result["stderr"] = stderr.decode(errors="replace")[-2000:]
    else:
        try:
            result["output"] = json.loads(stdout)
        except ValueError:
            result["output"] = stdout.decode(errors="replace")[-2000:]
    print(json.dumps({k: v for k, v in result.items() if k != "output"}), flush=True)
    return result


def _peak_of(argv: list[str], limit_mb: int | None) -> dict:
    """:func:`_timed` in a fresh interpreter, so that the children's maximum RSS is this command's."""
    helper = [sys.executable, __file__, "_one", "--limit-mb", str(limit_mb or 0), "--", *argv]
    done = subprocess.run(helper, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(directory: Path, limit_mb: int, epochs: int, measure: str, text: bool, only: set[str]) -> None:
    calopt = [shutil.which("calopt") or "calopt"]
    big, cal, sub, test = (directory / name for name in ("big.svm", "big.cal", "sub.svm", "test.svm"))
    if cal.exists() and (not only or "convert" in only):
        shutil.rmtree(cal)
    report = {"machine": describe(), "file_gb": round(os.path.getsize(big) / 1e9, 3), "measure": measure,
              "epochs": epochs, "steps": {}}
    if only and RESULTS.exists():  # re-run some steps, keep the others' figures
        report["steps"] = json.loads(RESULTS.read_text())["steps"]

    def _peak(argv: list[str], limit_mb: int | None, name: str = "") -> dict:
        if only and name not in only:
            return report["steps"][name]
        return _peak_of(argv, limit_mb)

    common = ["--measure", measure, "--test", str(test), "--json", "--no-progress"]
    report["steps"]["convert"] = _peak([*calopt, "convert", str(big), str(cal), "--json", "--no-progress"], limit_mb,
                                       "convert")
    report["steps"]["stream_converted"] = _peak([*calopt, "train", str(cal), "--epochs", str(epochs), *common],
                                                limit_mb, "stream_converted")
    report["steps"]["memory_sub_spade"] = _peak([*calopt, "train", str(sub), "--algorithm", "spade", "--select", "none",
                                                 "--epochs", str(epochs), *common], None, "memory_sub_spade")
    report["steps"]["memory_sub_default"] = _peak([*calopt, "train", str(sub), *common], None, "memory_sub_default")
    if text:
        report["steps"]["stream_text"] = _peak([*calopt, "train", str(big), "--stream", "--epochs", "1", *common],
                                               limit_mb, "stream_text")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    for name, step in report["steps"].items():
        output = step.get("output") if isinstance(step.get("output"), dict) else {}
        test_value = (output.get("test") or {}).get("value")
        print(f"{name}: exit {step['exit_code']}, {step['seconds']} s, peak RSS {step['peak_rss_mb_children_max']} MB"
              + (f", test {measure} {test_value:.4f}" if test_value is not None else ""))


def epochs(directory: Path, count: int, batch_sizes: list[int | None], repeat: int, compare: bool,
           out: Path | None = None) -> None:
    """Per-epoch seconds of SPADE and STAMP streamed from ``directory`` against reading X once,
    one BLAS thread; the bound is read again before each fit (interleaved: a busy machine slows
    both alike) and the ratio uses the bound read next to that fit. ``compare``: each fit also
    with the rows copied through the shuffle pool (``ChunkSource.mapped`` off: the route before
    the epoch gathered rows from the mapping), alternating with it in the same process."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import calopt
    from calopt.io.stream import open_stream

    threadpool_limits(1)
    X = np.load(directory / "X.npy", mmap_mode="r")
    block = max(1, (32 << 20) // max(1, X.strides[0]))

    def read_once() -> float:
        started, total = time.perf_counter(), 0.0
        for start in range(0, X.shape[0], block):
            total += float(np.add.reduce(X[start:start + block], axis=None))
        return time.perf_counter() - started

    def read_whole() -> float:  # one contiguous sum over the whole map (pages already mapped)
        started = time.perf_counter()
        float(np.add.reduce(X.reshape(-1)))
        return time.perf_counter() - started

    read_once()  # into the page cache
    report = {"machine": describe(), "directory": str(directory), "rows": int(X.shape[0]), "features": int(X.shape[1]),
              "bytes": int(X.nbytes), "blas": [f"{i['internal_api']} {i['num_threads']} threads"
                                               for i in threadpool_info()],
              "epochs": count, "repeat": repeat, "runs": []}
    routes = ["mapped", "pool"] if compare else ["mapped"]
    for _ in range(repeat):
        for batch_size in batch_sizes:
            for algorithm, measure in (("spade", "qmean"), ("stamp", "f1")):
                for route in routes:
                    reads = [min(read_once() for _ in range(3)), min(read_whole() for _ in range(3))]
                    bound = min(reads)
                    source = open_stream(directory)
                    if route == "pool":
                        source.mapped = lambda: None
                    load = os.getloadavg()[0]
                    model = calopt.fit(source, measure=measure, algorithm=algorithm, epochs=count, select="none",
                                       batch_size=batch_size)
                    cumulative = [row["seconds"] for row in model.history]
                    each = [b - a for a, b in zip([0.0] + cumulative[:-1], cumulative)]
                    run = {"algorithm": algorithm, "measure": measure, "route": route,
                           "batch_size": model.fit_report.batch_size, "batch_given": batch_size is not None,
                           "read_32mb_blocks_seconds": reads[0], "read_whole_seconds": reads[1],
                           "bound_seconds": bound, "fit_seconds": model.fit_seconds, "epoch_seconds": each,
                           "ratio_to_bound": min(each) / bound, "load_1min": [load, os.getloadavg()[0]]}
                    report["runs"].append(run)
                    print(f"{algorithm} {route:6s} batch {run['batch_size']:5d}: epochs "
                          f"{', '.join(f'{e:.2f}' for e in each)} s, {min(each) / bound:.1f}× reading X once "
                          f"({bound:.2f} s, {X.nbytes / bound / 1e9:.1f} GB/s), load {load:.2f}", flush=True)
    out = out or RESULTS.with_name("stream_epochs.json")
    out.write_text(json.dumps(report, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate")
    gen.add_argument("directory", type=Path)
    gen.add_argument("--gigabytes", type=float, default=5.0)
    gen.add_argument("--sub-rows", type=int, default=500_000)
    gen.add_argument("--seed", type=int, default=0)
    bench = commands.add_parser("run")
    bench.add_argument("directory", type=Path)
    bench.add_argument("--limit-mb", type=int, default=1024)
    bench.add_argument("--epochs", type=int, default=5)
    bench.add_argument("--measure", default="gmean")
    bench.add_argument("--text", action="store_true", help="also stream big.svm itself (one epoch)")
    bench.add_argument("--only", default="", help="comma-separated steps to re-run (the others kept from the JSON)")
    timing = commands.add_parser("epochs")
    timing.add_argument("directory", type=Path)
    timing.add_argument("--epochs", type=int, default=3)
    timing.add_argument("--batch-size", type=int, action="append", default=None,
                        help="repeatable (default: fit's default batch)")
    timing.add_argument("--repeat", type=int, default=1)
    timing.add_argument("--compare", action="store_true", help="also the rows copied through the shuffle pool")
    timing.add_argument("--out", type=Path, help="the results file (default results/stream_epochs.json)")
    one = commands.add_parser("_one")
    one.add_argument("--limit-mb", type=int, default=0)
    one.add_argument("argv", nargs="+")
    args = parser.parse_args()
    if args.command == "generate":
        generate(args.directory, args.gigabytes, args.sub_rows, args.seed)
    elif args.command == "epochs":
        epochs(args.directory, args.epochs, args.batch_size or [None], args.repeat, args.compare, args.out)
    elif args.command == "run":
        run(args.directory, args.limit_mb, args.epochs, args.measure, args.text,
            {step for step in args.only.split(",") if step})
    else:
        print(json.dumps(_timed(args.argv, args.limit_mb or None)))


if __name__ == "__main__":
    main()
