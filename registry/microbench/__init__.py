"""Building and running the C/OpenMP kernels shipped in microbench/."""
