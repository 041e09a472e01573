"""Data in: files (LIBSVM, CSV, NPZ), labels, the readers that serve mini-batches, embedded datasets."""

from calopt.io.files import Dataset, align_features, read_data, read_label_file, train_test_split

__all__ = ["Dataset", "align_features", "read_data", "read_label_file", "train_test_split"]
