# The numpy-thp workload of eval-real.toml: a 64 MiB array worked on again
# and again (huge pages save the emulated page walks there), beside a
# 512 MiB array of which one number per 2 MiB is written once (THP "always"
# backs each of those numbers with a whole huge page: memory bloat). The
# suite turns numpy's own MADV_HUGEPAGE off (NUMPY_MADVISE_HUGEPAGE=0), so
# huge pages come from the system setting or from the schemes only.
# Prints its rate as "X passes/s".
import sys, time
import numpy as np
hot = np.zeros(8 << 20)
sparse = np.zeros(64 << 20)
sparse[:: 1 << 18] = 1.0
t = time.time()
passes = 0
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 300):
    hot += 1.0
    passes += 1
print(f"{passes / (time.time() - t):.3f} passes/s")
