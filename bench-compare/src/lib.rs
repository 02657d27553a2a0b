//! Benchmark helpers shared by the bins.
