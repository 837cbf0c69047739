# The numpy workload of eval-real.toml: four 64 MiB arrays worked on one at
# a time, in turn (eight phases of N passes each), so the working set moves.
# Prints its rate as "X passes/s".
import sys, time
import numpy as np
n = 8 << 20  # 64 MiB of float64 per object
objs = [np.zeros(n) for _ in range(4)]
t = time.time()
passes = 0
for phase in range(8):
    a = objs[phase % 4]
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 25):
        a += 1.0
        passes += 1
print(f"{passes / (time.time() - t):.3f} passes/s")
