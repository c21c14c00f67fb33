"""A package whose modules import kernels relatively."""
