"""Benchmarks for Baton; see bench/README.md."""
