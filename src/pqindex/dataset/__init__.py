"""Datasets: many files, hive partitions, planning and scanning them as one table."""

from pqindex.dataset.dataset import Dataset, Scan, dataset

__all__ = ["Dataset", "Scan", "dataset"]
