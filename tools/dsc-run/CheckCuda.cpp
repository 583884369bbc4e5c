//===- CheckCuda.cpp - The CUDA backend against the CPU backend -----------===//
//
// The CPU backend is the reference: each CUDA kernel must reproduce the
// buffers its CPU counterpart writes (dropout and MLM masks bit for bit,
// hence the integer buffers' exact comparison), and training must follow
// the CPU's losses.
//
//===----------------------------------------------------------------------===//

#include "CheckCuda.h"

#include "dsc/Codegen/KernelCache.h"
#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/Half.h"
#include "dsc/Runtime/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <ostream>

namespace dsc {

namespace {

/// Element i of a float buffer.
float floatAt(rt::DType t, const void *p, int64_t i) {
  switch (t) {
  case rt::DType::F16:
    return rt::floatFromF16(static_cast<const uint16_t *>(p)[i]);
  case rt::DType::BF16:
    return rt::floatFromBF16(static_cast<const uint16_t *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

/// max|b - a| / max|a| over a float buffer (0 when both are all zero);
/// integer buffers give 0 when equal, infinity otherwise.
double relativeError(const rt::Buffer &buf, const void *ref, const void *got) {
  const int64_t n = buf.numElements();
  if (!rt::isFloat(buf.dtype))
    return std::memcmp(ref, got, buf.bytes()) == 0 ? 0.0 : INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = floatAt(buf.dtype, ref, i), b = floatAt(buf.dtype, got, i);
    if (std::isnan(a) != std::isnan(b))
      return INFINITY;
    if (!std::isnan(a)) {
      diff = std::max(diff, double(std::fabs(double(b) - double(a))));
      scale = std::max(scale, double(std::fabs(a)));
    }
  }
  return diff == 0 ? 0.0 : diff / std::max(scale, 1e-30);
}

} // namespace

rt::CudaOptions checkCudaOptions() {
  rt::CudaOptions o;
  o.kernelCacheDir = cuda::defaultKernelCacheDir();
  return o;
}

bool compareOnBothBackends(const rt::Program &p, const std::string &fnName,
                           rt::Backend &cpu, rt::Storage &cpuMem,
                           rt::Backend &gpu, rt::Storage &gpuMem,
                           const rt::RngContext &rng, double tolerance,
                           std::ostream &os) {
  const rt::Function &fn = p.function(fnName);
  cpu.run(p, fn, cpuMem, rng);
  gpu.run(p, fn, gpuMem, rng);
  std::map<std::string, double> worst; // per opcode
  bool ok = true;
  int compared = 0;
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const rt::Instr &I = fn.body[i];
    for (int id : I.outputs) {
      gpu.download(gpuMem, {id});
      const rt::Buffer &b = p.buffers[size_t(id)];
      const double err = relativeError(b, cpuMem.data(id), gpuMem.data(id));
      double &w = worst[rt::opcodeName(I.op)];
      w = std::max(w, err);
      ++compared;
      if (!(err <= tolerance) && ok) {
        char line[160];
        std::snprintf(line, sizeof line, "%.3g", err);
        os << "FAIL @" << fnName << " #" << i << " " << rt::opcodeName(I.op)
           << ": buffer '" << b.name << "' differs from the CPU by " << line
           << " (relative to its largest value; tolerance " << tolerance
           << ")\n";
        ok = false;
      }
    }
  }
  os << "@" << fnName << ": " << compared
     << " buffers compared; worst relative error per opcode:\n";
  for (const auto &[op, err] : worst) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s %.3g\n", op.c_str(), err);
    os << line;
  }
  return ok;
}

bool checkCudaAgainstCpu(const rt::Program &unplanned,
                         const rt::Program &planned, const rt::TokenFile &data,
                         const CudaCheckOptions &options, std::ostream &os) {
  auto comm = rt::createSingleRankCommunicator();
  bool ok = true;
  const uint64_t seed = uint64_t(unplanned.metaInt("seed", 42));
  {
    const rt::Program &p = unplanned;
    auto cpu = rt::createCpuBackend(*comm);
    auto gpu = rt::createCudaBackend(p, *comm, checkCudaOptions());
    rt::Storage cpuMem(p), gpuMem(p);
    rt::initializeParameters(p, cpuMem, seed);
    rt::initializeParameters(p, gpuMem, seed);
    gpu->upload(gpuMem, p.persistentBuffers());
    const int64_t B = p.metaInt("micro_batch"), T = p.metaInt("seq_len"),
                  A = p.metaInt("grad_accum", 1);
    const int ids = p.findBuffer(rt::BufferRole::Input, "input_ids");
    const int targets = p.findBuffer(rt::BufferRole::Input, "targets");
    const int step = p.findBuffer(rt::BufferRole::Input, "step");
    if (ids < 0 || targets < 0 || step < 0)
      throw rt::Error("compiled step: no input_ids, targets or step buffer");
    for (rt::Storage *m : {&cpuMem, &gpuMem}) {
      data.batch(0, 0, A, B, T, m->i32(ids), m->i32(targets));
      *m->i64(step) = 1;
    }
    gpu->upload(gpuMem, {ids, targets, step});
    os << "kernel check (one micro-step and one update, every buffer):\n";
    ok &= compareOnBothBackends(p, "micro_step", *cpu, cpuMem, *gpu, gpuMem,
                          rt::RngContext{seed, 0}, options.kernelTolerance, os);
    ok &= compareOnBothBackends(p, "apply_step", *cpu, cpuMem, *gpu, gpuMem,
                          rt::RngContext{seed, 0}, options.kernelTolerance, os);
  }
  if (options.steps > 0) {
    auto cpu = rt::createCpuBackend(*comm);
    auto gpu = rt::createCudaBackend(planned, *comm, checkCudaOptions());
    rt::Trainer cpuRun(planned, *cpu, *comm, seed);
    rt::Trainer gpuRun(planned, *gpu, *comm, seed);
    cpuRun.initializeWeights();
    gpuRun.initializeWeights();
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
