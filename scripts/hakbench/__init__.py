# SPDX-License-Identifier: MIT
"""hakmem's benchmark driver: the parts shared by scripts/bench.py and scripts/ab."""
