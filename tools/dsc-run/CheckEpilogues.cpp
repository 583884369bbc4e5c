//===- CheckEpilogues.cpp - cuBLASLt's epilogues against the CPU ----------===//
//
// `dsc-run check-cuda --epilogues`: one function whose GEMMs take every
// epilogue dsc can fuse (a Linear's bias + tanh GELU, the GELU gradient with
// its bias gradient, bias gradients from weight-gradient GEMMs of both
// layouts, a weight gradient accumulated with beta = 1), run whole on the
// CUDA backend with DSC_CUDA_EPILOGUES=all and on the CPU backend, fp32.
// The pre-activations span [-4, 4], where GELU's tanh form and its erf form
// differ by up to 4.7e-4 (1.2e-4 of the largest output): the 1e-5
// tolerance tells which form cuBLASLt computes, which is what keeps the
// GELU epilogues opt-in (gpu-check.sh's check-epilogues).
//
//===----------------------------------------------------------------------===//

#include "CheckCuda.h"
#include "HandProgram.h"

#include "dsc/Codegen/CudaEmitter.h"
#include "dsc/Runtime/BackendCompare.h"
#include "dsc/Runtime/CudaBackend.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <random>
#include <set>

namespace dsc {


bool checkEpilogues(std::ostream &os) {
  const int64_t M = 96, K = 16, N = 40, P = 24, Q = 32;
  using rt::Opcode;
  HandProgram e;
  e.fn.name = "epilogues";
  // y = gelu_tanh(x w + b): GELU_AUX_BIAS, h the aux output.
  const int x = e.input("x", {M, K}), w = e.input("w", {K, N}),
            b = e.input("b", {N}), h = e.temp("h", {M, N}),
            y = e.output("y", {M, N});
  const std::map<std::string, rt::AttrValue> kn = {{"transpose_w", int64_t(0)}};
  e.add(Opcode::Linear, {x, w}, {h}, kn);
  e.add(Opcode::BiasGelu, {h, b}, {y}, {{"approximation", "tanh"}});
  // dx, db = BiasGeluGrad(dz w2^T, h, b): DGELU_BGRAD.
  const int dz = e.input("dz", {M, P}), w2 = e.input("w2", {N, P}),
            dy = e.temp("dy", {M, N}), dx = e.output("dx", {M, N}),
            db = e.output("db", {N});
  e.add(Opcode::LinearGradInput, {dz, w2}, {dy}, kn);
  e.add(Opcode::BiasGeluGrad, {dy, h, b}, {dx, db},
        {{"approximation", "tanh"}});
  // acc += x2^T dz with beta = 1, and dz's column sums: BGRADA.
  const int x2 = e.input("x2", {M, K}), dw = e.temp("dw", {K, P}),
            acc = e.output("acc", {K, P}), sums = e.temp("sums", {P}),
            zeros = e.input("zeros", {P}), db2 = e.output("db2", {P});
  e.add(Opcode::LinearGradWeight, {x2, dz}, {dw}, kn);
  e.add(Opcode::Add, {acc, dw}, {acc});
  e.add(Opcode::ReduceTo, {dz}, {sums});
  e.add(Opcode::Add, {sums, zeros}, {db2});
  // A [Q, K] weight's gradient dz3^T x2, and dz3's column sums: BGRADB.
  const int dz3 = e.input("dz3", {M, Q}), dwT = e.output("dwT", {Q, K}),
            sums3 = e.temp("sums3", {Q}), zeros3 = e.input("zeros3", {Q}),
            db3 = e.output("db3", {Q});
  e.add(Opcode::LinearGradWeight, {x2, dz3}, {dwT},
        {{"transpose_w", int64_t(1)}});
  e.add(Opcode::ReduceTo, {dz3}, {sums3});
  e.add(Opcode::Add, {sums3, zeros3}, {db3});
  e.finish();
  const rt::Program &p = e.prog;

  // What the backend will emit: every epilogue must be formed, or this
  // checks nothing.
  cuda::EmitOptions emit;
  emit.geluEpilogues = emit.biasGradEpilogues = true;
  const std::set<cuda::GemmEpilogue> expected = {
      cuda::GemmEpilogue::GeluAuxBias, cuda::GemmEpilogue::DGeluBiasGrad,
      cuda::GemmEpilogue::BiasGradFromA, cuda::GemmEpilogue::BiasGradFromB};
  std::set<cuda::GemmEpilogue> formed;
  bool accumulates = false;
  for (const cuda::Gemm &g : cuda::emitCuda(p, emit).gemms) {
    formed.insert(g.epilogue);
    accumulates |= g.accumulate;
  }
  if (formed != expected || !accumulates) {
    os << "FAIL the emitter did not form every epilogue"
       << (accumulates ? "" : " or the beta = 1 accumulation") << "\n";
    return false;
  }
  os << "the emitter forms GELU_AUX_BIAS, DGELU_BGRAD, BGRADA with beta = 1 "
        "and BGRADB\n";
  if (std::string why = rt::cudaUnavailableReason(); !why.empty())
    throw Error("check-cuda: " + why);

  // Pre-activations over [-4, 4]: x w in about [-1, 1] plus biases from -3
  // to 3; gradients and the other operands normal.
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto comm = rt::createSingleRankCommunicator();
  rt::Storage cpuMem(p), gpuMem(p);
  for (int id : e.inputs)
    for (int64_t i = 0; i < p.buffers[size_t(id)].numElements(); ++i)
      cpuMem.f32(id)[i] = id == x || id == w ? unit(gen) * (id == w ? 0.4f : 1)
                                             : normal(gen);
  for (int64_t n = 0; n < N; ++n)
    cpuMem.f32(b)[n] = -3.0f + 6.0f * float(n) / float(N - 1);
  for (int id : {zeros, zeros3})
    std::memset(cpuMem.data(id), 0, p.buffers[size_t(id)].bytes());
  for (int64_t i = 0; i < K * P; ++i)
    cpuMem.f32(acc)[i] = normal(gen);
  std::vector<int> uploaded = e.inputs;
  uploaded.push_back(acc);
  for (int id : uploaded)
    std::memcpy(gpuMem.data(id), cpuMem.data(id),
                p.buffers[size_t(id)].bytes());

  // The CUDA backend reads DSC_CUDA_EPILOGUES when it emits the step.
  ::setenv("DSC_CUDA_EPILOGUES", "all", 1);
  auto cpu = rt::createCpuBackend(*comm);
  auto gpu = rt::createCudaBackend(p, *comm, checkCudaOptions());
  gpu->upload(gpuMem, uploaded);
  const rt::Function &fn = p.function("epilogues");
  cpu->run(p, fn, cpuMem, rt::RngContext{1, 0});
  gpu->run(p, fn, gpuMem, rt::RngContext{1, 0});
  gpu->download(gpuMem, e.outputs);

  const double tolerance = 1e-5;
  os << "cuBLASLt epilogues (bias + tanh GELU, its gradient and bias "
        "gradient, BGRADA with beta = 1, BGRADB; fp32, pre-activations in "
        "[-4, 4]) against the CPU, tolerance "
     << tolerance << " of each buffer's largest value:\n";
  bool ok = true;
  for (int id : e.outputs) {
    const rt::Buffer &buf = p.buffers[size_t(id)];
    const double err =
        rt::relativeBufferError(buf, cpuMem.data(id), gpuMem.data(id));
    char line[96];
    std::snprintf(line, sizeof line, "  %-6s %.3g%s\n", buf.name.c_str(), err,
                  err <= tolerance ? "" : "  FAIL");
    os << line;
    ok &= err <= tolerance;
  }
  // How far GELU's erf form lies from what the CPU computed: a GPU error of
  // about this size in y says cuBLASLt's GELU is the erf form.
  double erfGap = 0, largest = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    const double pre = cpuMem.f32(h)[i] + cpuMem.f32(b)[i % N];
    const double exact = 0.5 * pre * (1.0 + std::erf(pre / std::sqrt(2.0)));
    erfGap = std::max(erfGap, std::fabs(exact - cpuMem.f32(y)[i]));
    largest = std::max(largest, std::fabs(double(cpuMem.f32(y)[i])));
  }
  char line[128];
  std::snprintf(line, sizeof line,
                "(the erf form would be %.3g away in y)\n", erfGap / largest);
  os << line << (ok ? "PASS" : "FAIL") << "\n";
  return ok;
}

} // namespace dsc
