"""The static host-code check behind `fearless check` (E0502 aliased launches, E0382 moved
tensors): host code read with `ast`, never imported or run. driver.py (files in, findings out)
runs kernels.py -> flow.py (over effects.py and values.py) -> report.py. Imports nothing: the
command is cli/check.py."""
