//===- CheckCompression.cpp - The compressed optimizers' CUDA kernels -----===//
//
// `dsc-run check-cuda --compression`: a program of the compression stages'
// instructions over random operands, run on one GPU and on the CPU backend
// (see CheckCuda.h). The NCCL exchanges between the kernels need several
// GPUs; every kernel of the three optimizers' stages runs here.
//
//===----------------------------------------------------------------------===//

#include "CheckCuda.h"
#include "HandProgram.h"

#include "dsc/Runtime/BackendCompare.h"
#include "dsc/Runtime/CudaBackend.h"

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <random>

namespace dsc {


bool checkCompressionKernels(std::ostream &os) {
  // n not a multiple of 8 (the padding), P over one sum-of-squares chunk.
  const int64_t n = 20001, P = 20016, C = 4104;
  HandProgram c;
  using rt::DType;
  using rt::Opcode;
  const int avg = c.input("avg", {n}), g = c.input("g", {n}),
            gscale = c.input("gscale", {1}),
            m = c.output("m", {n});
  const int error = c.input("error", {P}),
            signs = c.output("signs", {P / 8}, DType::U8),
            scale = c.output("scale", {1}),
            newError = c.output("new_error", {P});
  const int skip = c.input("skip", {1}),
            keptSigns = c.output("skipped_signs", {P / 8}, DType::U8),
            keptScale = c.output("skipped_scale", {1}),
            keptError = c.output("kept_error", {P});
  const int chunkSigns =
                c.input("chunk_signs", {2 * C / 8}, DType::U8),
            chunkScales = c.input("chunk_scales", {2}),
            mean = c.output("mean", {C}),
            decoded = c.output("decoded", {2 * C});
  const int param = c.input("param", {n}),
            variance = c.input("variance", {n}),
            lr = c.input("lr", {1}),
            newParam = c.output("new_param", {n}),
            newM = c.output("new_m", {n}),
            padded = c.output("padded", {P});
  const int accumulator = c.input("accumulator", {n}),
            localParam = c.output("local_param", {n}),
            localM = c.output("local_m", {n}),
            localU = c.output("local_u", {n}),
            start = c.output("start_param", {n}),
            scaled = c.output("scaled", {n}),
            lrSum = c.input("lr_sum", {1}),
            syncParam = c.output("sync_param", {n}),
            syncM = c.output("sync_m", {n});
  c.fn.name = "compression";
  c.add(Opcode::EmaUpdate, {avg, g, gscale}, {m}, {{"beta", 0.9}});
  c.add(Opcode::OnebitCompress, {m, error}, {signs, scale, newError});
  c.add(Opcode::OnebitCompress, {m, error, skip},
        {keptSigns, keptScale, keptError});
  c.add(Opcode::OnebitDecodeMean, {chunkSigns, chunkScales}, {mean});
  c.add(Opcode::OnebitDecode, {chunkSigns, chunkScales}, {decoded});
  c.add(Opcode::FrozenAdam, {param, avg, m, variance, lr}, {newParam, newM},
        {{"eps", 1e-8}, {"weight_decay", 0.01}});
  c.add(Opcode::FlatResize, {m}, {padded});
  // 0/1 Adam: a local step, the unwinding, the synchronisation.
  c.add(Opcode::LocalAdam, {param, g, avg, variance, accumulator, lr},
        {localParam, localM, localU}, {{"eps", 1e-8}, {"weight_decay", 0.01}});
  c.add(Opcode::ZeroOneUnwind, {param, accumulator, variance},
        {start, scaled}, {{"eps", 1e-8}});
  c.add(Opcode::ZeroOneSync, {param, m, variance, lrSum}, {syncParam, syncM},
        {{"eps", 1e-8}});
  c.finish("lamb");
  // 1-bit LAMB's kernels reduce (trust ratios, norms, the factor's
  // maximum): their sums run in another order than the CPU's.
  const int coeff = c.input("coeff", {1}),
            newCoeff = c.output("new_coeff", {1}),
            scaleA = c.output("scale_a", {1}),
            scaleB = c.output("scale_b", {1}),
            scaled2 = c.output("scaled_m", {n}),
            fresh = c.input("fresh", {n}),
            lambParam = c.output("lamb_param", {n}),
            lambM = c.output("lamb_m", {n}),
            lambFresh = c.output("lamb_fresh", {n}),
            lastFactor = c.input("last_factor", {1}),
            newLastFactor = c.output("new_last_factor", {1});
  c.add(Opcode::LambCoeffEma, {param, avg, variance, coeff}, {newCoeff},
        {{"eps", 1e-8},
         {"weight_decay", 0.01},
         {"max_coeff", 10.0},
         {"min_coeff", 0.01},
         {"coeff_beta", 0.9}});
  c.add(Opcode::MomentumScales, {avg, g}, {scaleA, scaleB});
  c.add(Opcode::ScaleBy, {avg, gscale}, {scaled2});
  c.add(Opcode::OnebitLambUpdate,
        {param, avg, g, variance, fresh, gscale, coeff, lastFactor, lr},
        {lambParam, lambM, lambFresh, newLastFactor},
        {{"beta1", 0.9},
         {"beta2", 0.999},
         {"eps", 1e-8},
         {"weight_decay", 0.01},
         {"factor_max", 4.0},
         {"factor_min", 0.5},
         {"factor_threshold", 0.1}});
  c.finish();
  const rt::Program p =
      rt::withInstructionFunctions(c.prog, {"compression", "lamb"});

  auto comm = rt::createSingleRankCommunicator();
  auto cpu = rt::createCpuBackend(*comm);
  auto gpu = rt::createCudaBackend(p, *comm, checkCudaOptions());
  rt::Storage cpuMem(p), gpuMem(p);
  // Normal values with exact zeros sprinkled in (the frozen variance's
  // mask, the sign of zero); the variance non-negative.
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int id : c.inputs) {
    const rt::Buffer &b = p.buffers[size_t(id)];
    for (int64_t i = 0; i < b.numElements(); ++i) {
      if (b.dtype == DType::U8)
        cpuMem.u8(id)[i] = uint8_t(gen());
      else
        cpuMem.f32(id)[i] = i % 37 == 0 ? 0.0f : normal(gen);
    }
  }
  cpuMem.f32(gscale)[0] = 0.5f;
  cpuMem.f32(skip)[0] = 1.0f;
  cpuMem.f32(lr)[0] = 1e-3f;
  cpuMem.f32(lrSum)[0] = 3e-3f;
  cpuMem.f32(coeff)[0] = 0.8f;
  cpuMem.f32(lastFactor)[0] = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    cpuMem.f32(variance)[i] = std::fabs(cpuMem.f32(variance)[i]);
    cpuMem.f32(fresh)[i] = std::fabs(cpuMem.f32(fresh)[i]);
  }
  os << "compression kernels (1-bit Adam's and 0/1 Adam's stages, bit for "
        "bit):\n";
  bool ok = rt::compareInstructionByInstruction(
      p, "compression", *cpu, cpuMem, *gpu, gpuMem, rt::RngContext{1, 0},
      /*tolerance=*/0.0, os);
  // A skipped step keeps the error and sends a zero scale.
  if (std::memcmp(gpuMem.data(keptError), cpuMem.data(error),
                  size_t(P) * sizeof(float)) != 0 ||
      gpuMem.f32(keptScale)[0] != 0.0f) {
    os << "FAIL a skipped step changed the error or sent a scale\n";
    ok = false;
  }
  os << "1-bit LAMB's kernels (reductions in another order: 1e-6):\n";
  ok &= rt::compareInstructionByInstruction(p, "lamb", *cpu, cpuMem, *gpu,
                                            gpuMem, rt::RngContext{1, 0},
                                            /*tolerance=*/1e-6, os);
  os << (ok ? "PASS" : "FAIL") << "\n";
  return ok;
}

} // namespace dsc
