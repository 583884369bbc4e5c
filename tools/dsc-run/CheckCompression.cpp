//===- CheckCompression.cpp - The compressed optimizers' CUDA kernels -----===//
//
// `dsc-run check-cuda --compression`: a program of the compression stages'
// instructions over random operands, run on one GPU and on the CPU backend
// (see CheckCuda.h). The NCCL exchanges between the kernels need several
// GPUs; every kernel of the three optimizers' stages runs here.
//
//===----------------------------------------------------------------------===//

#include "CheckCuda.h"

#include "dsc/Runtime/BackendCompare.h"
#include "dsc/Runtime/CudaBackend.h"

#include <cmath>
#include <cstring>
#include <map>
#include <ostream>
#include <random>

namespace dsc {

namespace {

/// A program of the compression stages' kernels over Input and Output
/// buffers (no memory plan: every buffer keeps its value).
struct CompressionProgram {
  rt::Program prog;
  rt::Function fn;
  std::vector<int> inputs;

  int buffer(const std::string &name, std::vector<int64_t> shape,
             bool output, rt::DType dtype = rt::DType::F32) {
    rt::Buffer b;
    b.name = name;
    b.role = output ? rt::BufferRole::Output : rt::BufferRole::Input;
    b.dtype = dtype;
    b.shape = std::move(shape);
    prog.buffers.push_back(b);
    const int id = int(prog.buffers.size() - 1);
    if (!output)
      inputs.push_back(id);
    return id;
  }
  void add(rt::Opcode op, std::vector<int> ins, std::vector<int> outs,
           std::map<std::string, rt::AttrValue> attrs = {}) {
    rt::Instr I;
    I.op = op;
    I.inputs = std::move(ins);
    I.outputs = std::move(outs);
    I.attrs = std::move(attrs);
    fn.body.push_back(I);
  }
};

} // namespace

bool checkCompressionKernels(std::ostream &os) {
  // n not a multiple of 8 (the padding), P over one sum-of-squares chunk.
  const int64_t n = 20001, P = 20016, C = 4104;
  CompressionProgram c;
  using rt::DType;
  using rt::Opcode;
  const int avg = c.buffer("avg", {n}, false), g = c.buffer("g", {n}, false),
            gscale = c.buffer("gscale", {1}, false),
            m = c.buffer("m", {n}, true);
  const int error = c.buffer("error", {P}, false),
            signs = c.buffer("signs", {P / 8}, true, DType::U8),
            scale = c.buffer("scale", {1}, true),
            newError = c.buffer("new_error", {P}, true);
  const int skip = c.buffer("skip", {1}, false),
            keptSigns = c.buffer("skipped_signs", {P / 8}, true, DType::U8),
            keptScale = c.buffer("skipped_scale", {1}, true),
            keptError = c.buffer("kept_error", {P}, true);
  const int chunkSigns =
                c.buffer("chunk_signs", {2 * C / 8}, false, DType::U8),
            chunkScales = c.buffer("chunk_scales", {2}, false),
            mean = c.buffer("mean", {C}, true),
            decoded = c.buffer("decoded", {2 * C}, true);
  const int param = c.buffer("param", {n}, false),
            variance = c.buffer("variance", {n}, false),
            lr = c.buffer("lr", {1}, false),
            newParam = c.buffer("new_param", {n}, true),
            newM = c.buffer("new_m", {n}, true),
            padded = c.buffer("padded", {P}, true);
  const int accumulator = c.buffer("accumulator", {n}, false),
            localParam = c.buffer("local_param", {n}, true),
            localM = c.buffer("local_m", {n}, true),
            localU = c.buffer("local_u", {n}, true),
            start = c.buffer("start_param", {n}, true),
            scaled = c.buffer("scaled", {n}, true),
            lrSum = c.buffer("lr_sum", {1}, false),
            syncParam = c.buffer("sync_param", {n}, true),
            syncM = c.buffer("sync_m", {n}, true);
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
  c.prog.functions[c.fn.name] = c.fn;
  // 1-bit LAMB's kernels reduce (trust ratios, norms, the factor's
  // maximum): their sums run in another order than the CPU's.
  const int coeff = c.buffer("coeff", {1}, false),
            newCoeff = c.buffer("new_coeff", {1}, true),
            scaleA = c.buffer("scale_a", {1}, true),
            scaleB = c.buffer("scale_b", {1}, true),
            scaled2 = c.buffer("scaled_m", {n}, true),
            fresh = c.buffer("fresh", {n}, false),
            lambParam = c.buffer("lamb_param", {n}, true),
            lambM = c.buffer("lamb_m", {n}, true),
            lambFresh = c.buffer("lamb_fresh", {n}, true),
            lastFactor = c.buffer("last_factor", {1}, false),
            newLastFactor = c.buffer("new_last_factor", {1}, true);
  c.fn = {};
  c.fn.name = "lamb";
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
  c.prog.functions[c.fn.name] = c.fn;
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
