//===- CheckCuda.cpp - The CUDA backend against the CPU backend -----------===//
//
// The CPU backend is the reference: each CUDA kernel, run on the CPU's
// values of its operands, must reproduce the buffers its CPU counterpart
// writes (dropout and MLM masks bit for bit, hence the integer buffers'
// exact comparison); a whole micro-step, fused as the backend runs it,
// must give the CPU's gradients; and training must follow the CPU's
// losses.
//
//===----------------------------------------------------------------------===//

#include "CheckCuda.h"

#include "dsc/Codegen/KernelCache.h"
#include "dsc/Runtime/BackendCompare.h"
#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>

#include <unistd.h>

namespace dsc {

rt::CudaOptions checkCudaOptions() {
  rt::CudaOptions o;
  o.kernelCacheDir = cuda::defaultKernelCacheDir();
  o.cpuDropoutMasks = true;
  return o;
}

namespace {

/// A parameter initialised to one value everywhere (LayerNorm's ones, a
/// bias's zeros) lets a kernel that ignores it pass every comparison: the
/// checks start from such values moved by up to +-0.1, from a fixed hash
/// of (`salt`, element). Other parameters are left as they are.
void jitterIfConstant(float *x, int64_t n, uint64_t salt) {
  if (n == 0 || std::any_of(x, x + n, [&](float v) { return v != x[0]; }))
    return;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = (uint64_t(i) ^ (salt * 0x9E3779B97F4A7C15ull)) *
                 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    x[i] += 0.1f * (float(h & 0xFFFF) / 32768.0f - 1.0f);
  }
}

/// `program` on the CPU and CUDA backends, from the same initial weights,
/// jittered (jitterIfConstant) through a weights file both load.
struct TrainerPair {
  TrainerPair(const rt::Program &program, rt::Communicator &comm,
              uint64_t seed)
      : cpuBackend(rt::createCpuBackend(comm)),
        gpuBackend(rt::createCudaBackend(program, comm, checkCudaOptions())),
        cpu(program, *cpuBackend, comm, seed),
        gpu(program, *gpuBackend, comm, seed) {
    cpu.initializeWeights();
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        ("dsc-check-cuda-" + std::to_string(::getpid()) + ".safetensors");
    try {
      cpu.saveWeights(path.string());
      rt::Safetensors weights = rt::Safetensors::read(
          path.string(), /*withU8=*/true); // 4-bit bases
      uint64_t salt = 0;
      for (auto &[name, tensor] : weights.tensors)
        if (tensor.dtype == rt::DType::F32)
          jitterIfConstant(reinterpret_cast<float *>(tensor.bytes.data()),
                           int64_t(tensor.bytes.size() / sizeof(float)),
                           ++salt);
      weights.write(path.string());
      cpu.loadWeights(path.string());
      gpu.loadWeights(path.string());
    } catch (...) {
      std::filesystem::remove(path); // no file left behind
      throw;
    }
    std::filesystem::remove(path);
  }
  std::unique_ptr<rt::Backend> cpuBackend, gpuBackend;
  rt::Trainer cpu, gpu;
};

} // namespace

bool checkCudaAgainstCpu(const rt::Program &unplanned,
                         const rt::Program &planned, const rt::TokenFile &data,
                         const CudaCheckOptions &options, std::ostream &os) {
  auto comm = rt::createSingleRankCommunicator();
  bool ok = true;
  const uint64_t seed = uint64_t(unplanned.metaInt("seed", 42));
  {
    // Every buffer on its own, but ZeRO-Infinity's swap file needs the
    // plan's offsets in it.
    const bool swapFile = std::any_of(
        unplanned.buffers.begin(), unplanned.buffers.end(),
        [](const rt::Buffer &b) { return b.nvme; });
    const rt::Program p = rt::withInstructionFunctions(
        swapFile ? planned : unplanned, {"micro_step", "apply_step"});
    auto cpu = rt::createCpuBackend(*comm);
    auto gpu = rt::createCudaBackend(p, *comm, checkCudaOptions());
    // The GPU gets each instruction's operands from the CPU's storage.
    rt::Storage cpuMem(p), gpuMem(p);
    rt::initializeParameters(p, cpuMem, seed);
    for (size_t id = 0; id < p.buffers.size(); ++id)
      if (p.buffers[id].role == rt::BufferRole::Param &&
          p.buffers[id].dtype == rt::DType::F32)
        jitterIfConstant(cpuMem.f32(int(id)), p.buffers[id].numElements(), id);
    const int64_t B = p.metaInt("micro_batch"), T = p.metaInt("seq_len"),
                  A = p.metaInt("grad_accum", 1);
    const int ids = p.findBuffer(rt::BufferRole::Input, "input_ids");
    const int targets = p.findBuffer(rt::BufferRole::Input, "targets");
    const int step = p.findBuffer(rt::BufferRole::Input, "step");
    if (ids < 0 || targets < 0 || step < 0)
      throw dsc::Error("compiled step: no input_ids, targets or step buffer");
    data.batch(0, 0, A, B, T, cpuMem.i32(ids), cpuMem.i32(targets));
    *cpuMem.i64(step) = 1;
    os << "kernel check (one micro-step and one update, every buffer; the "
          "reference is the CPU):\n";
    for (const char *fn : {"micro_step", "apply_step"})
      ok &= rt::compareInstructionByInstruction(p, fn, *cpu, cpuMem, *gpu,
                                                gpuMem, rt::RngContext{seed, 0},
                                                options.kernelTolerance, os);
  }
  {
    TrainerPair runs(planned, *comm, seed);
    // Twice on the same batch: the second adds into gradients the first
    // left, which a GEMM accumulating with beta = 1 must read.
    os << "gradient check (one micro-step run twice into the same "
          "accumulators, as each backend runs it, its fusions included; the "
          "reference is the CPU):\n";
    ok &= rt::compareGradients(runs.cpu.inspectMicroStep(data, 2),
                               runs.gpu.inspectMicroStep(data, 2),
                               options.gradientTolerance, os);
  }
  if (options.steps > 0) {
    TrainerPair runs(planned, *comm, seed);
    rt::Trainer &cpuRun = runs.cpu, &gpuRun = runs.gpu;
    os << "training check (" << options.steps
       << " steps):\n  step  cpu loss      cuda loss     relative diff\n";
    double worst = 0;
    for (int64_t s = 0; s < options.steps; ++s) {
      const double a = cpuRun.trainStep(data).loss;
      const double b = gpuRun.trainStep(data).loss;
      const double rel = std::fabs(b - a) / std::max(std::fabs(a), 1e-30);
      worst = std::isnan(rel) ? INFINITY : std::max(worst, rel);
      char line[160];
      std::snprintf(line, sizeof line, "  %4lld  %.8f  %.8f  %.3g\n",
                    (long long)s, a, b, rel);
      os << line;
    }
    const bool lossOk = worst <= options.lossTolerance;
    os << (lossOk ? "losses within " : "FAIL losses differ by up to ")
       << (lossOk ? options.lossTolerance : worst)
       << (lossOk ? "" : " (tolerance " + std::to_string(options.lossTolerance) +
                             ")")
       << "\n";
    ok &= lossOk;
  }
  os << (ok ? "PASS" : "FAIL") << "\n";
  return ok;
}

} // namespace dsc
