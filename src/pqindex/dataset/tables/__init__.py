"""Lake tables (Delta Lake, Apache Iceberg): detection, snapshots read through the
tables' own libraries (deltalake, pyiceberg), and indexing as a table commit."""
