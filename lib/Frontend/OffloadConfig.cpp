//===- OffloadConfig.cpp - zero_optimization's offload keys ---------------===//
//
// ZeRO-Offload (DeepSpeed's zero/offload_config.py): `offload_optimizer`
// with device "cpu" keeps the optimizer state and the fp32 master weights
// in host memory and runs the update there (-dsc-offload-optimizer); the
// deprecated `cpu_offload: true` means the same; `offload_param` with
// device "cpu" (stage 3, with the optimizer offloaded) keeps the parameter
// shards there too. ZeRO-Infinity: `offload_optimizer` with device "nvme"
// and `nvme_path` keeps that state in a swap file there
// (-dsc-offload-nvme), and `offload_param` with device "nvme" (the same
// nvme_path) the parameter shards too (-dsc-offload-nvme params). The
// compressed optimizers are refused with any ZeRO stage
// (DeepSpeedConfig.cpp), so never reach offload.
//
//===----------------------------------------------------------------------===//

#include "ConfigSections.h"

#include <filesystem>

namespace dsc {
namespace config_reader {

namespace {

/// The `device` of an offload section: "none", "cpu" or "nvme", spelled
/// as DeepSpeed's enum spells them (it refuses "CPU" and null), so a
/// config dsc reads is one DeepSpeed reads too.
std::string offloadDevice(const Ctx &c, const std::string &p, const json &sec) {
  auto it = sec.find("device");
  if (it == sec.end())
    return "none";
  const std::string expected = "\"none\", \"cpu\" or \"nvme\"";
  if (it->is_null())
    c.bad(p + ".device", *it, expected + " (omit the key for \"none\")");
  const std::string device = c.string(p + ".device", *it, expected);
  if (device != "none" && device != "cpu" && device != "nvme")
    c.bad(p + ".device", *it,
          expected + (lower(device) != device ? ", in lower case as DeepSpeed "
                                                "accepts them"
                                              : ""));
  return device;
}

/// The `nvme_path` of offload section `p` with device "nvme", which
/// DeepSpeed requires: a non-empty path (no file name holds a NUL).
std::string nvmePath(const Ctx &c, const std::string &p, const json &sec) {
  auto it = sec.find("nvme_path");
  if (it == sec.end() || it->is_null())
    c.fail(p + ".nvme_path: device \"nvme\" needs the directory of the "
               "swap file (a path on the NVMe drive)");
  std::string path = c.string(p + ".nvme_path", *it, "a path");
  if (path.empty() || path.find('\0') != std::string::npos)
    c.bad(p + ".nvme_path", *it, "a path");
  return path;
}

/// The device the offload section `p` (null, or an object of `keys`)
/// offloads to: "none", "cpu" or "nvme".
std::string offloadTarget(const Ctx &c, const std::string &p, const json &sec,
                          const std::vector<std::string> &keys) {
  if (sec.is_null())
    return "none";
  c.object(p, sec);
  c.checkKeys(p, sec, keys);
  return offloadDevice(c, p, sec);
}

} // namespace

void parseOffloadOptimizer(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string p = "zero_optimization.offload_optimizer";
  const std::string device =
      offloadTarget(c, p, sec,
                    {"device", "nvme_path", "buffer_count", "pin_memory",
                     "pipeline_read", "pipeline_write", "fast_init", "ratio"});
  if (device == "none")
    return;
  // ZeRO-Infinity: the state in a swap file in nvme_path, which DeepSpeed
  // requires with device "nvme".
  if (device == "nvme")
    t.offloadNvmePath = nvmePath(c, p, sec);
  // Checked, no effect: the CPU backend's host store is ordinary memory
  // and the CUDA backend always page-locks it; the others tune NVMe.
  for (const char *key : {"pin_memory", "pipeline_read", "pipeline_write",
                          "fast_init"})
    if (auto it = sec.find(key); it != sec.end())
      c.boolean(p + "." + key, *it);
  if (auto it = sec.find("buffer_count"); it != sec.end())
    c.positive(p + ".buffer_count", *it);
  if (auto it = sec.find("nvme_path"); it != sec.end() && !it->is_null())
    c.string(p + ".nvme_path", *it, "a path");
  if (auto it = sec.find("ratio"); it != sec.end() &&
      c.number(p + ".ratio", *it, [](double r) { return r > 0 && r <= 1; },
               "a number in (0, 1]") != 1.0)
    c.fail(p + ".ratio: " + c.shown(p + ".ratio", *it) +
           " is not supported (a partial optimizer offload, ZenFlow's); "
           "dsc offloads the whole optimizer: use 1");
  t.offloadOptimizer = true;
}

void parseAio(const Ctx &c, const json &sec, AioOptions &aio) {
  if (sec.is_null())
    return;
  c.object("aio", sec);
  c.checkKeys("aio", sec,
              {"block_size", "queue_depth", "thread_count",
               "intra_op_parallelism", "single_submit", "overlap_events",
               "use_gds"});
  // O_DIRECT moves whole 4 KiB blocks; each thread stages queue_depth
  // requests of block_size bytes, so the bounds keep that memory sane.
  if (auto it = sec.find("block_size"); it != sec.end()) {
    aio.blockSize = c.integer("aio.block_size", *it, 4096, int64_t(1) << 28,
                              "a multiple of 4096 in [4096, 268435456]");
    if (aio.blockSize % 4096 != 0)
      c.bad("aio.block_size", *it, "a multiple of 4096 in [4096, 268435456]");
  }
  if (auto it = sec.find("queue_depth"); it != sec.end())
    aio.queueDepth =
        c.integer("aio.queue_depth", *it, 1, 4096, "an integer in [1, 4096]");
  // DeepSpeed renamed thread_count to intra_op_parallelism; both mean the
  // threads that split each transfer.
  bool threadsGiven = false;
  for (const char *key : {"thread_count", "intra_op_parallelism"})
    if (auto it = sec.find(key); it != sec.end() && !it->is_null()) {
      const std::string p = std::string("aio.") + key;
      const int64_t v = c.integer(p, *it, 1, 256, "an integer in [1, 256]");
      if (threadsGiven && v != aio.threads)
        c.fail("aio.thread_count and aio.intra_op_parallelism are one "
               "setting under DeepSpeed's old and new names; they differ (" +
               std::to_string(aio.threads) + " and " + std::to_string(v) +
               "): give one");
      threadsGiven = true;
      aio.threads = v;
    }
  if (auto it = sec.find("single_submit"); it != sec.end())
    aio.singleSubmit = c.boolean("aio.single_submit", *it);
  if (auto it = sec.find("overlap_events"); it != sec.end())
    aio.overlapEvents = c.boolean("aio.overlap_events", *it);
  if (auto it = sec.find("use_gds"); it != sec.end())
    c.boolean("aio.use_gds", *it);
}

void parseOffloadParam(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string p = "zero_optimization.offload_param";
  const std::string device =
      offloadTarget(c, p, sec,
                    {"device", "nvme_path", "buffer_count", "buffer_size",
                     "max_in_cpu", "pin_memory"});
  if (device == "none")
    return;
  // ZeRO-Infinity's parameters: the optimizer's swap file holds them too
  // (checkOffloadCombination).
  if (device == "nvme")
    t.offloadParamsNvmePath = nvmePath(c, p, sec);
  // Checked, no effect: pinning (see offload_optimizer) and NVMe's buffers.
  if (auto it = sec.find("pin_memory"); it != sec.end())
    c.boolean(p + ".pin_memory", *it);
  for (const char *key : {"buffer_count", "buffer_size", "max_in_cpu"})
    if (auto it = sec.find(key); it != sec.end())
      c.integer(p + "." + key, *it, 0, std::numeric_limits<int64_t>::max(),
                "an integer >= 0");
  if (auto it = sec.find("nvme_path"); it != sec.end() && !it->is_null())
    c.string(p + ".nvme_path", *it, "a path");
  t.offloadParams = true;
}

void parseCpuOffloadParam(const Ctx &c, const std::string &key,
                          const json &v, TrainConfig &t) {
  if (!v.is_null() && c.boolean("zero_optimization." + key, v))
    t.offloadParams = true;
}

void parseCpuOffload(const Ctx &c, const json &v, TrainConfig &t) {
  if (v.is_null())
    return;
  if (c.boolean("zero_optimization.cpu_offload", v))
    t.offloadOptimizer = true;
}

/// Whether two nvme_path values name the same directory ("swap/" and
/// "./swap" do), resolved as far as they exist.
static bool sameDirectory(const std::string &a, const std::string &b) {
  std::error_code ea, eb;
  const std::filesystem::path x = std::filesystem::weakly_canonical(a, ea),
                              y = std::filesystem::weakly_canonical(b, eb);
  if (ea || eb)
    return a == b;
  // (With a trailing separator on both: "swap/" resolves to "swap/".)
  return (x.lexically_normal() / "") == (y.lexically_normal() / "");
}

void checkOffloadCombination(const Ctx &c, const TrainConfig &t) {
  if (!t.offloadParamsNvmePath.empty() &&
      (t.offloadNvmePath.empty() ||
       !sameDirectory(t.offloadParamsNvmePath, t.offloadNvmePath)))
    c.fail("zero_optimization.offload_param.device \"nvme\" needs "
           "offload_optimizer.device \"nvme\" with the same nvme_path (one "
           "swap file per rank holds the parameter shards and the optimizer "
           "state the host update reads)");
  if (t.offloadParams && !t.offloadOptimizer)
    c.fail("zero_optimization.offload_param (device " +
           std::string(t.offloadParamsNvmePath.empty() ? "cpu" : "nvme") +
           ") without "
           "offload_optimizer is not supported: the offloaded parameter "
           "shards are the host update's master weights; set "
           "offload_optimizer.device \"cpu\" too");
  if (!t.offloadOptimizer)
    return;
  const std::string what =
      "zero_optimization.offload_optimizer (device " +
      std::string(t.offloadNvmePath.empty() ? "cpu" : "nvme") + ")";
  if (t.zeroStage == 0)
    c.fail(what + " needs zero_optimization.stage 1, 2 or 3 (DeepSpeed: "
           "\"valid for ZeRO stage 1, 2, 3\"); set a stage");
}

} // namespace config_reader
} // namespace dsc
