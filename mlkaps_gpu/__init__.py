"""mlkaps_gpu: input-aware auto-tuning of HPC kernels, shipped as C / CUDA decision trees."""

__version__ = "0.1.0"
