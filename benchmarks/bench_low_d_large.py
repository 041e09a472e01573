"""Large data with few columns: calopt's default against the split route and its twin.

Public collections hold many sets of 10⁵-10⁶ rows and 3-30 dense columns (physics events, sensor
readings, skin segmentation, forest cover): where one ``LogisticRegression`` fit takes a tenth of
a second, calopt's large-data sample (:mod:`calopt.training.sampling`) is the whole of its time.
Eight shapes, 120,000-1,000,000 training rows × 3-28 columns, 2-30% positive (``bench_rare_large.make``:
Gaussian columns of unequal scales, one log-normal column, a product of two columns in the score),
two seeds each, F1 and G-mean; 30% more rows as the test set; the shapes split once into a
development half (even positions) and a confirmation half (odd). Each cell: calopt's default,
the route a user takes at this size (``MaxAbsScaler + LogisticRegression`` on 80% of the rows, the
threshold the exact best cut on the other 20%; ``bench_sizes.SplitRoute``) and its twin (the split
drawn by seed 1).

    python benchmarks/bench_low_d_large.py --half dev
    python benchmarks/bench_low_d_large.py --half confirm --out OUT.json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_rare_large
import synthetic_shapes

#: (name, training rows, columns, positive rate)
SHAPES = [
    ("lowd-150kx3", 150_000, 3, 0.2),
    ("lowd-200kx10", 200_000, 10, 0.05),
    ("lowd-300kx5", 300_000, 5, 0.3),
    ("lowd-500kx20", 500_000, 20, 0.1),
    ("lowd-250kx6", 250_000, 6, 0.02),
    ("lowd-1mx4", 1_000_000, 4, 0.1),
    ("lowd-120kx28", 120_000, 28, 0.15),
    ("lowd-400kx8", 400_000, 8, 0.03),
]
SEEDS = 2


def main(argv: list[str] | None = None) -> None:
    synthetic_shapes.main(argv, __doc__.splitlines()[0], "low_d_large", SHAPES, SEEDS, bench_rare_large.make,
                          bench_rare_large.split_route, bench_rare_large.streamed)


if __name__ == "__main__":
    main()
