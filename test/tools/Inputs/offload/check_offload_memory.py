"""check_offload_memory.py WEIGHTS.safetensors N STAGE PLAIN.json OFFLOAD.json

Checks the per-rank memory reports of `dsc-run estimate --world-size N
--memory-report` for a ZeRO stage without (PLAIN) and with (OFFLOAD)
zero_optimization.offload_optimizer (device cpu), AdamW in fp32, and
compares them with DeepSpeed's published model-state formulas for
cpu_offload=True (additional_buffer_factor 1; N GPUs on one node):

  deepspeed/runtime/zero/stage_1_and_2.py,
  estimate_zero2_model_states_mem_needs (ZeRO-1 and 2):
      gpu_mem = 2 * Psi
      cpu_mem = Psi * max(4 * N, 16)                       (per node)
  deepspeed/runtime/zero/stage3.py,
  estimate_zero3_model_states_mem_needs (offload_optimizer only,
  cpu_offload_params=False, zero_init=True):
      gpu_mem = 4 * largest_layer_params + int(2 * Psi / N)
      cpu_mem = Psi * 16                                   (per node)

dsc's host store per rank: the fp32 master shard and Adam's two moment
shards (12 bytes per element of the rank's shards, exactly) and the host
copies of the reduced gradient shards (4 bytes) - DeepSpeed's 16 bytes per
parameter over the node, up to ZeRO's padding to a multiple of N per
tensor. On the device dsc keeps the f32 parameters (4 bytes against
DeepSpeed's fp16 2) and its f32 gradient accumulators (DeepSpeed's formula
leaves out its gradient buckets); the optimizer state leaves the device."""
import json
import sys

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/dp")
from weights import tensor_sizes  # noqa: E402

weights, n, stage = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plain, offload = json.load(open(sys.argv[4])), json.load(open(sys.argv[5]))
sizes = tensor_sizes(weights)
psi = sum(sizes)
shards = sum(-(-s // n) for s in sizes)  # elements of this rank's shards


def check(what, got, want):
    if got != want:
        sys.exit(f"stage {stage}, {n} ranks: {what} is {got}, expected {want}")


# The device keeps what it kept; only the optimizer state leaves it.
for key in ("parameters", "gradients", "activations"):
    check("device " + key, offload[key], plain[key])
check("device optimizer_state", offload["optimizer_state"], 0)
check("host_optimizer_state", offload["host_optimizer_state"],
      plain["optimizer_state"])
check("host_optimizer_state", offload["host_optimizer_state"], 8 * shards)
check("host_master_weights", offload["host_master_weights"], 4 * shards)
# The gradient copies are all live when the first update runs (it waits
# for the global norm), so the host arena holds at least 16 bytes per
# element of the shards.
host_states = offload["host_master_weights"] + offload["host_optimizer_state"]
if offload["host_peak_bytes"] < host_states + 4 * shards:
    sys.exit(f"host peak {offload['host_peak_bytes']} < {host_states} + "
             f"4 * {shards} gradient bytes")
if offload["peak_bytes"] >= plain["peak_bytes"]:
    sys.exit(f"device peak {offload['peak_bytes']} is not below the "
             f"non-offloaded {plain['peak_bytes']}")

# DeepSpeed's formulas, for up to 4 ranks on the node (max(4 N, 16) = 16).
if n > 4:
    sys.exit("the comparison assumes at most 4 ranks on the node")
if stage <= 2:
    ds_gpu, ds_cpu = 2 * psi, psi * max(4 * n, 16)
    # DeepSpeed's fp16 weights are dsc's f32 weights at half the bytes.
    check("device parameters (f32)", offload["parameters"], 2 * ds_gpu)
else:
    largest = max(sizes)  # the test model has one weight per module at most
    ds_gpu = 4 * largest + int(2 * psi / n)
    ds_cpu = psi * 16
    # The fp16 shards' int(2 Psi / N), in f32 and padded per tensor.
    slack = offload["parameters"] - 2 * (ds_gpu - 4 * largest)
    if not 0 <= slack <= 4 * len(sizes):
        sys.exit(f"device parameter shards {offload['parameters']} are not "
                 f"twice DeepSpeed's {ds_gpu - 4 * largest} (+ padding)")
# The node's host memory: N ranks' host arenas against DeepSpeed's cpu_mem,
# at least its 16 bytes per parameter and within its own buffer factor 1.5.
node_host = n * offload["host_peak_bytes"]
if not ds_cpu <= node_host <= 1.5 * ds_cpu:
    sys.exit(f"the node's host arenas {node_host} are not within "
             f"[1, 1.5] x DeepSpeed's cpu_mem {ds_cpu}")
print(f"stage {stage} on {n} ranks: device peak {offload['peak_bytes']} "
      f"(without offload {plain['peak_bytes']}); the node's host arenas "
      f"{node_host} = {node_host / ds_cpu:.3f} x DeepSpeed's cpu_mem {ds_cpu}")
