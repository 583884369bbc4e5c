//===- Storage.cpp - Buffer memory and parameter initialization ----------===//

#include "dsc/Support/Philox.h"
#include "dsc/Runtime/Runtime.h"
#include "dsc/Program/Half.h"
#include "dsc/Program/TensorSlice.h"

#include "FourBitWeights.h"
#include "SwapFile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace dsc::rt {

namespace {
void freeAligned(char *p) { std::free(p); }
} // namespace

Storage::~Storage() {
  for (const auto &[p, bytes] : mappings)
    munmap(p, bytes);
}

Storage::Storage(const Program &program) {
  for (const Buffer &b : program.buffers) {
    for (int64_t d : b.shape)
      if (d < 0)
        throw Error("buffer '" + b.name + "' has a negative dimension");
    sizes.push_back(b.bytes());
    host.push_back(b.host);
    nvmeOffset.push_back(b.nvme ? b.offset : -1);
  }
  // ZeRO-Infinity: the NVMe-resident buffers live in the swap file.
  bool anyNvme = false;
  for (size_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer &b = program.buffers[i];
    if (!b.nvme)
      continue;
    anyNvme = true;
    if (program.arenaBytes < 0 || b.offset < 0 ||
        b.offset + int64_t(sizes[i]) > program.nvmeBytes)
      throw Error("memory plan places NVMe buffer '" + b.name +
                  "' outside the " + std::to_string(program.nvmeBytes) +
                  "-byte swap file");
  }
  if (anyNvme) {
    // DeepSpeed's aio section, as the driver recorded it (-dsc-offload-nvme).
    AioOptions aio;
    aio.blockSize = program.metaInt("aio_block_size", aio.blockSize, 4096);
    aio.queueDepth = program.metaInt("aio_queue_depth", aio.queueDepth, 1);
    aio.threads = program.metaInt("aio_threads", aio.threads, 1);
    aio.singleSubmit = program.metaInt("aio_single_submit", 0, 0) != 0;
    aio.overlapEvents = program.metaInt("aio_overlap_events", 1, 0) != 0;
    swap = std::make_unique<SwapFile>(program.metaString("nvme_path"),
                                      program.nvmeBytes, aio);
  }
  if (program.arenaBytes >= 0) {
    // One arena per memory; the plan (lib/Program/MemoryPlan.cpp) placed
    // every buffer.
    arenaSize = size_t(program.arenaBytes);
    hostArenaSize = size_t(std::max<int64_t>(0, program.hostArenaBytes));
    for (size_t i = 0; i < program.buffers.size(); ++i) {
      const Buffer &b = program.buffers[i];
      if (b.nvme)
        continue;
      const size_t limit = b.host ? hostArenaSize : arenaSize;
      if (b.offset < 0 || b.offset % 64 != 0 ||
          size_t(b.offset) + sizes[i] > limit)
        throw Error("memory plan places buffer '" + b.name + "' (" +
                    std::to_string(sizes[i]) + " bytes) at offset " +
                    std::to_string(b.offset) + ", outside the " +
                    std::to_string(limit) + "-byte " +
                    (b.host ? "host arena" : "arena") +
                    " or not 64-byte aligned");
    }
    // Zero pages that cost memory only once touched: with the CUDA
    // backend this arena mirrors the device's, and the driver moves only
    // the parameters, inputs and what it reads back through it.
    auto allocateArena = [&](size_t bytes, const char *what) {
      const size_t padded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
      void *p = mmap(nullptr, padded, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED)
        throw Error("out of memory allocating the " + std::to_string(bytes) +
                    "-byte " + what);
      mappings.emplace_back(static_cast<char *>(p), padded);
      return static_cast<char *>(p);
    };
    arena = allocateArena(arenaSize, "arena");
    char *hostArena =
        hostArenaSize ? allocateArena(hostArenaSize, "host arena") : nullptr;
    for (const Buffer &b : program.buffers)
      ptrs.push_back(b.nvme ? swap->mapped() + b.offset
                            : (b.host ? hostArena : arena) + b.offset);
    total = arenaSize + hostArenaSize;
    return;
  }
  owned.reserve(program.buffers.size());
  ptrs.reserve(program.buffers.size());
  for (const Buffer &b : program.buffers) {
    size_t bytes = b.bytes();
    // Round up to a whole number of cache lines (aligned_alloc requires a
    // multiple of the alignment) and never allocate zero bytes.
    size_t padded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    char *p = static_cast<char *>(std::aligned_alloc(64, padded));
    if (!p)
      throw Error("out of memory allocating " + std::to_string(bytes) +
                  " bytes for buffer '" + b.name + "'");
    std::memset(p, 0, padded);
    owned.emplace_back(p, &freeAligned);
    ptrs.push_back(p);
    total += bytes;
  }
}

void Storage::swapIn(int buffer, void *dst) {
  if (!swap || nvmeOffset[size_t(buffer)] < 0)
    throw Error("swap_in: buffer #" + std::to_string(buffer) +
                " is not in the NVMe swap file");
  swap->read(nvmeOffset[size_t(buffer)], dst, int64_t(sizes[size_t(buffer)]));
}

void Storage::swapOut(int buffer, const void *src) {
  if (!swap || nvmeOffset[size_t(buffer)] < 0)
    throw Error("swap_out: buffer #" + std::to_string(buffer) +
                " is not in the NVMe swap file");
  swap->write(nvmeOffset[size_t(buffer)], src, int64_t(sizes[size_t(buffer)]));
}

void Storage::noteUse(int buffer) {
  size_t end = size_t(static_cast<char *>(ptrs[size_t(buffer)]) - arena) +
               sizes[size_t(buffer)];
  highWater = std::max(highWater, end);
}

/// FNV-1a, 32 bits: the per-parameter Philox stream id.
static uint32_t nameHash(const std::string &s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

// Initialization scheme (independent of thread count and of every other
// buffer in the program, so adding a buffer or a pass never changes weights):
//   key     = philoxKey(seed)
//   element pair j (elements 2j, 2j+1) of a Normal(0, std) parameter draws
//   block   = philox4x32_10({j, fnv1a32(buffer name), 0x1417, 0}, key)
//   u1      = ((block[0] >> 8) + 1) * 2^-24   in (0, 1]   (log never sees 0)
//   u2      = (block[1] >> 8) * 2^-24         in [0, 1)
//   r       = sqrt(-2 ln u1)  (double precision)
//   x[2j]   = std * r * cos(2 pi u2),  x[2j+1] = std * r * sin(2 pi u2)
// Zeros/None -> 0, Ones -> 1. Every other persistent buffer (GradAcc,
// OptState, Output) is zeroed; Temp and Input buffers are left alone.
namespace {

/// Elements [first, end) of parameter `b`'s whole tensor, per its init rule,
/// into x[0, end - first).
void fillWholeRange(const Buffer &b, const std::array<uint32_t, 2> &key, float *x,
                    int64_t first, int64_t end) {
  if (b.init == InitKind::Ones) {
    std::fill(x, x + (end - first), 1.0f);
    return;
  }
  const uint32_t stream = nameHash(b.name);
  const double stdev = b.initStd;
  if (b.init == InitKind::Uniform) { // one draw per element
#pragma omp parallel for schedule(static)
    for (int64_t w = first; w < end; ++w) {
      PhiloxBlock r = philox4x32_10(
          {uint32_t(w), stream, 0x1418u, uint32_t(uint64_t(w) >> 32)}, key);
      const double u = double(r[0] >> 8) * 0x1p-24; // [0, 1)
      x[w - first] = float(stdev * (2.0 * u - 1.0));
    }
    return;
  }
  // Element pair j of the whole tensor is elements 2j and 2j+1.
  const int64_t firstPair = first / 2, endPair = (end + 1) / 2;
#pragma omp parallel for schedule(static)
  for (int64_t j = firstPair; j < endPair; ++j) {
    PhiloxBlock r = philox4x32_10(
        {uint32_t(j), stream, 0x1417u, uint32_t(uint64_t(j) >> 32)}, key);
    double u1 = (double((r[0] >> 8) + 1)) * 0x1p-24;
    double u2 = double(r[1] >> 8) * 0x1p-24;
    double rad = std::sqrt(-2.0 * std::log(u1));
    double th = 2.0 * M_PI * u2;
    if (2 * j >= first)
      x[2 * j - first] = float(stdev * rad * std::cos(th));
    if (2 * j + 1 >= first && 2 * j + 1 < end)
      x[2 * j + 1 - first] = float(stdev * rad * std::sin(th));
  }
}

} // namespace

void initializeParameters(const Program &program, Storage &storage,
                          uint64_t seed, int rank, const std::vector<int> *only) {
  const auto key = philoxKey(seed);
  const Mesh mesh = program.mesh();
  const MeshAxis zeroAxis = program.zeroAxis();
  for (size_t bi = 0; bi < program.buffers.size(); ++bi) {
    const Buffer &b = program.buffers[bi];
    if (b.role == BufferRole::Temp || b.role == BufferRole::Input)
      continue;
    if (only && std::find(only->begin(), only->end(), int(bi)) == only->end())
      continue;
    const int64_t n = b.numElements();
    void *raw = storage.data(int(bi));
    if (b.role != BufferRole::Param || b.init == InitKind::None ||
        b.init == InitKind::Zeros) {
      std::memset(raw, 0, b.bytes());
      continue;
    }
    if (b.fourBit) {
      // QLoRA: the whole weight drawn in f32, then quantized; this rank
      // keeps its part of the bytes (ZeRO-3: a shard, zero-padded).
      const int64_t elements = b.fourBit->rows * b.fourBit->cols;
      std::vector<float> w(static_cast<size_t>(elements));
      fillWholeRange(b, key, w.data(), 0, elements);
      const std::vector<char> blob = quantizeWeight(*b.fourBit, w.data());
      const int64_t first =
          b.wholeShape.empty() ? 0 : mesh.coordinate(rank, zeroAxis) * n;
      std::memset(raw, 0, b.bytes());
      if (first < int64_t(blob.size()))
        std::memcpy(raw, blob.data() + first,
                    size_t(std::min<int64_t>(n, int64_t(blob.size()) - first)));
      continue;
    }
    // A 16-bit parameter (a frozen weight under mixed precision) is drawn
    // in f32 and rounded to nearest even.
    const bool half = b.dtype == DType::F16 || b.dtype == DType::BF16;
    if (b.dtype != DType::F32 && !half)
      throw Error("parameter '" + b.name + "' must be f32, f16 or bf16 to be "
                  "initialized");
    std::vector<float> wide;
    if (half)
      wide.resize(size_t(n));
    float *x = half ? wide.data() : static_cast<float *>(raw);
    std::fill(x, x + n, 0.0f);
    // This buffer holds elements [first, first + n) of a tensor of `total`
    // elements (ZeRO's shard of it; past `total` is the zero padding): the
    // whole tensor, or this rank's tensor-parallel slice of it.
    int64_t first = 0, total = n;
    if (!b.wholeShape.empty()) {
      first = mesh.coordinate(rank, zeroAxis) * n;
      total = elementCount(b.wholeShape);
    }
    // A shard wholly in the padding (block-aligned shards of a small
    // tensor) holds no elements of it.
    const int64_t end = std::max(first, std::min(first + n, total));
    if (b.sliceDim < 0) {
      fillWholeRange(b, key, x, first, end);
    } else {
      const SliceMap map = SliceMap::of(
          b, b.wholeShape.empty() ? b.shape : b.wholeShape, mesh.tensor);
      map.forEachRun(mesh.coordinate(rank, MeshAxis::Tensor),
                     [&](int64_t slice, int64_t whole, int64_t count) {
                       int64_t lo = std::max(slice, first),
                               hi = std::min(slice + count, end);
                       if (lo < hi)
                         fillWholeRange(b, key, x + (lo - first),
                                        whole + (lo - slice),
                                        whole + (hi - slice));
                     });
    }
    if (half) {
      auto *h = static_cast<uint16_t *>(raw);
      for (int64_t i = 0; i < n; ++i)
        h[i] = b.dtype == DType::BF16 ? bf16FromFloat(wide[size_t(i)])
                                      : f16FromFloat(wide[size_t(i)]);
    }
  }
}

} // namespace dsc::rt
