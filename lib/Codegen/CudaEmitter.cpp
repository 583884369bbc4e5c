//===- CudaEmitter.cpp - rt::Program -> one CUDA translation unit --------===//
//
// The driver of the CUDA emitter: decides every buffer's storage type (the
// mixed-precision rule in CudaEmitter.h), folds roundings into their
// producers, turns GEMM instructions into cuBLASLt descriptors, builds a
// launcher per remaining instruction (emitKernel: the emit logic of its
// kernel family in lib/Kernels), merges identical launchers and writes the
// .cu (the device library of lib/Kernels, kernels, host launchers) and its
// header.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"
#include "Common/DeviceLibrary.h"

#include "dsc/Program/InstrCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

namespace dsc::cuda {

DeviceLayout deviceLayout(const rt::Program &program) {
  DeviceLayout layout;
  for (const rt::Buffer &b : program.buffers) {
    if (b.host) { // in host memory (ZeRO-Offload), not the device arena
      layout.offsets.push_back(0);
      continue;
    }
    if (program.arenaBytes >= 0) {
      layout.offsets.push_back(size_t(b.offset));
      continue;
    }
    layout.offsets.push_back(layout.arenaBytes);
    layout.arenaBytes += (b.bytes() + 255) / 256 * 256;
  }
  if (program.arenaBytes >= 0)
    layout.arenaBytes = size_t(program.arenaBytes);
  return layout;
}

bool Gemm::operator==(const Gemm &o) const {
  return op == o.op && batch == o.batch && M == o.M && N == o.N &&
         K == o.K && transA == o.transA && transB == o.transB &&
         lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
         strideA == o.strideA && strideB == o.strideB &&
         strideC == o.strideC && alpha == o.alpha && bias == o.bias &&
         accumulate == o.accumulate &&
         a == o.a && b == o.b && c == o.c && biasType == o.biasType &&
         epilogue == o.epilogue && auxType == o.auxType;
}


using namespace detail;

namespace {

using Route = rt::OpRoute;

Route routeOf(rt::Opcode op) { return rt::opInfo(op).route; }

/// Emits the launcher of a non-GEMM instruction: its kernel family's emit
/// logic (lib/Kernels) handles it.
void emitKernel(KernelSpec &s) {
  const rt::InstrDims d = rt::checkInstr(s.program, s.I);
  switch (rt::opInfo(s.I.op).kernels) {
  case rt::KernelFamily::Elementwise:
    return emitElementwise(s, d);
  case rt::KernelFamily::Norms:
    return emitNorms(s, d);
  case rt::KernelFamily::Attention:
    return emitAttention(s, d);
  case rt::KernelFamily::EmbeddingLoss:
    return emitEmbeddingLoss(s, d);
  case rt::KernelFamily::Optimizers:
    return emitOptimizers(s, d);
  case rt::KernelFamily::Gated:
    return emitGated(s, d);
  case rt::KernelFamily::Rotary:
    return emitRotary(s, d);
  case rt::KernelFamily::Quantized:
    return emitQuantized(s, d);
  case rt::KernelFamily::Moe:
    return emitMoe(s, d);
  // GEMMs are cuBLASLt descriptors, collectives go to the communicator.
  case rt::KernelFamily::Gemm:
  case rt::KernelFamily::Collective:
    break;
  case rt::KernelFamily::Compression:
    return emitCompression(s, d);
  }
  s.fail("internal: not emitted as a single kernel");
}

/// The log-sum-exp buffer a fused attention writes (Attention) or reads
/// (AttentionGrad): what ties a gradient to its forward.
int lseOf(const rt::Instr &I) {
  return I.op == rt::Opcode::Attention ? I.outputs.at(1) : I.inputs.at(5);
}

class Emitter {
public:
  Emitter(const rt::Program &program, const EmitOptions &options)
      : P(program), options(options) {}
  Module run();

private:
  void emitFunction(const rt::Function &fn);
  /// The Add that only adds weight-gradient GEMM `i`'s result into an f32
  /// accumulator in place (`acc = acc + dw`), with nothing between them
  /// touching the accumulator: the GEMM can do it with beta = 1.
  std::optional<size_t> accumulatingAdd(const rt::Function &fn, size_t i) const;
  /// The GELU epilogues of `fn` (EmitOptions::geluEpilogues), by the
  /// index of the instruction whose place the fused GEMM takes, with the
  /// other instruction: a Linear with the BiasGelu right after it (at the
  /// Linear), a BiasGeluGrad with the LinearGradInput before it that alone
  /// produces its upstream gradient (at the BiasGeluGrad: the GEMM moves
  /// down, so its inputs must stay intact until there). The forward's
  /// epilogue leaves the pre-activation with its bias in the Linear's
  /// output, which the gradient's epilogue reads; so a Linear's output is
  /// fused only when every reader of it is absorbed this way.
  std::map<size_t, size_t> geluEpilogues(const rt::Function &fn) const;
  /// Finds the bias-gradient epilogues of `fn` (EmitOptions::
  /// biasGradEpilogues) into `biasGrads`: by LinearGradWeight index, the
  /// ReduceTo that sums the GEMM's dy into an f32 [N] bias gradient. The
  /// GEMM stays where it is and writes the bias gradient there, so nothing
  /// may read it before, and when the ReduceTo came later nothing between
  /// may touch its bytes; dy must hold the same values at both places.
  void findBiasGradEpilogues(const rt::Function &fn);
  /// Whether buffers `a` and `b` share bytes: the same buffer, or (in a
  /// planned program) overlapping ranges of the arena.
  bool overlap(int a, int b) const;
  /// What the step at instruction `m` writes: its outputs, or the
  /// accumulator of the Add it performs with beta = 1, and the bias
  /// gradient of its bias-gradient epilogue.
  std::vector<int> writesAt(const rt::Function &fn, size_t m) const;
  /// Whether buffer `id` appears in a function other than `fn`.
  bool usedOutside(const rt::Function &fn, int id) const;
  /// `accumulate`: the Add the GEMM performs (C = its accumulator);
  /// `gelu`: the BiasGelu or BiasGeluGrad it performs as its epilogue.
  /// `biasGrad`: the ReduceTo whose bias gradient it writes.
  Step gemmStep(const rt::Instr &I, const rt::Instr *accumulate = nullptr,
                const rt::Instr *gelu = nullptr,
                const rt::Instr *biasGrad = nullptr);
  int addLauncher(KernelSpec &spec);
  /// A vocabulary-parallel instruction's phases (emitVocabPhase) and the
  /// group's all-reduces between them.
  void emitVocabParallel(const rt::Instr &I, size_t i, std::vector<Step> &steps);
  void writeSource();
  void writeHeader();

  const rt::Program &P;
  /// Per buffer: the instructions of the function being emitted that read
  /// or write it, ascending (indexUses), and the number of functions that
  /// use it: lookups instead of scans of the program per candidate.
  std::vector<std::vector<size_t>> uses;
  std::vector<int> functionsUsing;
  std::vector<int> indexed; ///< the buffers with entries in `uses`
  void indexUses(const rt::Function &fn);
  const EmitOptions &options;
  Module M;
  std::map<std::string, int> launcherByKey;
  std::vector<std::string> launcherDevice; ///< device code per launcher
  std::map<rt::Opcode, int> perOpcode;  ///< launcher name counters
  /// The statistics (lse buffers) of fused attentions whose forward or
  /// gradient cuDNN cannot run.
  std::set<int> cudnnRefused;
  /// findBiasGradEpilogues of the function being emitted.
  std::map<size_t, size_t> biasGrads;
};

std::optional<size_t> Emitter::accumulatingAdd(const rt::Function &fn,
                                               size_t i) const {
  const rt::Instr &I = fn.body[i];
  if (I.op != rt::Opcode::LinearGradWeight || I.outputs.size() != 1)
    return std::nullopt;
  const int dw = I.outputs[0];
  const rt::Buffer &out = P.buffers[size_t(dw)];
  if (out.role != rt::BufferRole::Temp || out.dtype != Storage::F32)
    return std::nullopt;
  std::optional<size_t> add;
  for (size_t j : uses[size_t(dw)]) {
    const rt::Instr &J = fn.body[j];
    const bool reads = std::count(J.inputs.begin(), J.inputs.end(), dw) > 0;
    if (j <= i || !reads)
      continue;
    if (add || J.op != rt::Opcode::Add || J.inputs.size() != 2 ||
        J.outputs.size() != 1)
      return std::nullopt;
    add = j;
  }
  if (!add)
    return std::nullopt;
  const rt::Instr &A = fn.body[*add];
  const int acc = A.inputs[0] == dw ? A.inputs[1] : A.inputs[0];
  const rt::Buffer &accBuf = P.buffers[size_t(acc)];
  if (acc == dw || A.outputs[0] != acc || accBuf.dtype != Storage::F32 ||
      accBuf.numElements() != out.numElements())
    return std::nullopt;
  // Nothing from the GEMM to the Add touches the accumulator.
  const std::vector<size_t> &a = uses[size_t(acc)];
  auto first = std::lower_bound(a.begin(), a.end(), i);
  if (first != a.end() && *first < *add)
    return std::nullopt;
  return add;
}

bool Emitter::usedOutside(const rt::Function &fn, int id) const {
  (void)fn; // `uses` is its index
  return functionsUsing[size_t(id)] > (uses[size_t(id)].empty() ? 0 : 1);
}

void Emitter::indexUses(const rt::Function &fn) {
  // Only the previous function's entries are cleared: check-cuda's
  // programs have a function per instruction.
  uses.resize(P.buffers.size());
  for (int id : indexed)
    uses[size_t(id)].clear();
  indexed.clear();
  for (size_t i = 0; i < fn.body.size(); ++i)
    for (const std::vector<int> *ids : {&fn.body[i].inputs, &fn.body[i].outputs})
      for (int id : *ids) {
        std::vector<size_t> &u = uses[size_t(id)];
        if (u.empty())
          indexed.push_back(id);
        if (u.empty() || u.back() != i)
          u.push_back(i);
      }
}

std::map<size_t, size_t> Emitter::geluEpilogues(const rt::Function &fn) const {
  std::map<size_t, size_t> fused;
  if (!options.geluEpilogues)
    return fused;
  auto temp = [&](int id) {
    return P.buffers[size_t(id)].role == rt::BufferRole::Temp &&
           !usedOutside(fn, id);
  };
  auto dtype = [&](int id) { return P.buffers[size_t(id)].dtype; };
  for (size_t i = 0; i + 1 < fn.body.size(); ++i) {
    const rt::Instr &L = fn.body[i], &B = fn.body[i + 1];
    if (L.op != rt::Opcode::Linear || L.inputs.size() != 2 ||
        B.op != rt::Opcode::BiasGelu || B.inputs[0] != L.outputs[0] ||
        !rt::checkInstr(P, B).tanh)
      continue;
    const int h = L.outputs[0], bias = B.inputs[1];
    if (!temp(h) || dtype(B.outputs[0]) != dtype(h))
      continue;
    std::map<size_t, size_t> pairs{{i, i + 1}};
    bool ok = true;
    for (size_t j : uses[size_t(h)]) {
      if (!ok)
        break;
      const rt::Instr &J = fn.body[j];
      const bool reads = std::count(J.inputs.begin(), J.inputs.end(), h) > 0;
      const bool writes = std::count(J.outputs.begin(), J.outputs.end(), h) > 0;
      if (j == i || j == i + 1 || (!reads && !writes))
        continue;
      // Another reader must be a gradient the epilogue of its upstream
      // GEMM computes: BiasGeluGrad(dy, h, bias) after the
      // LinearGradInput that writes dy, which nothing else touches.
      ok = !writes && J.op == rt::Opcode::BiasGeluGrad && J.inputs[1] == h &&
           J.inputs[2] == bias && J.inputs[0] != h;
      if (!ok)
        break;
      const int dy = J.inputs[0];
      // dy's last writer before j (k), which must be the only other
      // instruction that touches it.
      const std::vector<size_t> &dyUses = uses[size_t(dy)];
      std::optional<size_t> writer;
      for (size_t m : dyUses)
        if (m < j && std::count(fn.body[m].outputs.begin(),
                                fn.body[m].outputs.end(), dy))
          writer = m;
      ok = writer && fn.body[*writer].op == rt::Opcode::LinearGradInput &&
           temp(dy) && dtype(J.outputs[1]) == Storage::F32 &&
           dtype(J.outputs[0]) == dtype(dy);
      if (!ok)
        break;
      const size_t k = *writer;
      const rt::Instr &G = fn.body[k];
      for (size_t m : dyUses)
        ok = ok && (m == j || m == k);
      // The GEMM moves down to j: nothing between may write the bytes it
      // reads (the memory plan reuses bytes), nor h or the bias.
      for (size_t m = k + 1; m < j && ok; ++m)
        for (int id : writesAt(fn, m))
          for (int read : {G.inputs[0], G.inputs[1], h, bias})
            ok = ok && !overlap(id, read);
      pairs[j] = k;
    }
    if (ok)
      fused.insert(pairs.begin(), pairs.end());
  }
  return fused;
}

bool Emitter::overlap(int a, int b) const {
  if (a == b)
    return true;
  const rt::Buffer &x = P.buffers[size_t(a)], &y = P.buffers[size_t(b)];
  if (P.arenaBytes < 0 || x.offset < 0 || y.offset < 0)
    return false;
  return x.offset < y.offset + int64_t(y.bytes()) &&
         y.offset < x.offset + int64_t(x.bytes());
}

std::vector<int> Emitter::writesAt(const rt::Function &fn, size_t m) const {
  std::vector<int> writes = fn.body[m].outputs;
  if (std::optional<size_t> add = accumulatingAdd(fn, m))
    writes = fn.body[*add].outputs;
  if (auto it = biasGrads.find(m); it != biasGrads.end())
    writes.push_back(fn.body[it->second].outputs[0]);
  return writes;
}

void Emitter::findBiasGradEpilogues(const rt::Function &fn) {
  biasGrads.clear();
  if (!options.biasGradEpilogues)
    return;
  for (size_t r = 0; r < fn.body.size(); ++r) {
    const rt::Instr &R = fn.body[r];
    if (R.op != rt::Opcode::ReduceTo || R.host)
      continue;
    const int dy = R.inputs[0], dbias = R.outputs[0];
    const rt::Buffer &out = P.buffers[size_t(dbias)];
    const rt::Buffer &in = P.buffers[size_t(dy)];
    if (out.role != rt::BufferRole::Temp || usedOutside(fn, dbias) ||
        out.dtype != Storage::F32 || out.shape.size() != 1 ||
        in.shape.empty() || in.shape.back() != out.shape[0])
      continue;
    // The weight gradient whose dy this sums over every row.
    std::optional<size_t> gemm;
    for (size_t g : uses[size_t(dy)]) {
      const rt::Instr &G = fn.body[g];
      if (G.op == rt::Opcode::LinearGradWeight && G.inputs.size() == 2 &&
          G.inputs[1] == dy && !biasGrads.count(g)) {
        gemm = g;
        break;
      }
    }
    if (!gemm)
      continue;
    const size_t g = *gemm;
    const rt::Instr &G = fn.body[g];
    // cuBLASLt writes the bias gradient in the output's type: an f32 dw
    // (what mixed precision keeps; an accumulating GEMM's C is f32 too).
    if (G.host || rt::checkInstr(P, G).N != out.shape[0] ||
        P.buffers[size_t(G.outputs[0])].dtype != Storage::F32)
      continue;
    // The bias gradient is first written at the GEMM: every other use of
    // it reads it after the GEMM.
    bool ok = true;
    for (size_t m : uses[size_t(dbias)])
      ok = ok && (m == r || (m > g && !std::count(fn.body[m].outputs.begin(),
                                                  fn.body[m].outputs.end(),
                                                  dbias)));
    // dy holds the same values where the ReduceTo read it.
    for (size_t m = std::min(g, r) + 1; m < std::max(g, r) && ok; ++m)
      for (int id : writesAt(fn, m))
        ok = ok && !overlap(id, dy);
    // Written early (the ReduceTo came after the GEMM): its bytes must be
    // free from the GEMM on, the GEMM's own operands included.
    for (size_t m = g; m < r && ok; ++m) {
      std::vector<int> touched = writesAt(fn, m);
      touched.insert(touched.end(), fn.body[m].inputs.begin(),
                     fn.body[m].inputs.end());
      for (int id : touched)
        ok = ok && !overlap(id, dbias);
    }
    if (ok)
      biasGrads[g] = r;
  }
}

Step Emitter::gemmStep(const rt::Instr &I, const rt::Instr *accumulate,
                       const rt::Instr *gelu, const rt::Instr *biasGrad) {
  KernelSpec s(P, I); // operand access and messages
  Gemm g;
  g.op = I.op;
  Step step;
  step.kind = Step::Kind::Gemm;
  auto arg = [&](int id) {
    Step::Arg a;
    a.buffers.push_back(id);
    step.args.push_back(a);
  };
  const rt::InstrDims d = rt::checkInstr(P, I);
  if (I.op == rt::Opcode::BatchMatmul) {
    g.transA = d.transA;
    g.transB = d.transB;
    g.alpha = I.has("alpha") ? I.getFloat("alpha") : 1.0;
    g.M = d.M;
    g.K = d.K;
    g.N = d.N;
    g.batch = d.batch;
    g.lda = g.transA ? g.M : g.K;
    g.ldb = g.transB ? g.K : g.N;
    g.ldc = g.N;
    g.strideA = g.M * g.K;
    g.strideB = g.K * g.N;
    g.strideC = g.M * g.N;
    arg(s.inId(0));
    arg(s.inId(1));
  } else {
    const bool tw = d.transW;
    const int64_t K = d.K, N = d.N;
    if (I.op == rt::Opcode::Linear) {
      g.M = d.M;
      g.N = N;
      g.K = K;
      g.transB = tw;
      g.lda = K;
      g.ldb = tw ? K : N;
      g.ldc = N;
      arg(s.inId(0));
      arg(s.inId(1));
      if (I.inputs.size() == 3) {
        g.bias = true;
        g.biasType = s.inType(2);
      }
    } else if (I.op == rt::Opcode::LinearGradInput) {
      // dx[M,K] = dy[M,N] @ W^T (W^T is w itself for w[N,K]).
      g.M = d.M;
      g.N = K;
      g.K = N;
      g.transB = !tw;
      g.lda = N;
      g.ldb = tw ? K : N;
      g.ldc = K;
      arg(s.inId(0));
      arg(s.inId(1));
    } else {
      g.transA = true;
      g.K = d.M;
      if (tw) { // dw[N,K] = dy^T @ x
        g.M = N;
        g.N = K;
        g.lda = N;
        g.ldb = K;
        g.ldc = K;
        arg(s.inId(1));
        arg(s.inId(0));
      } else { // dw[K,N] = x^T @ dy
        g.M = K;
        g.N = N;
        g.lda = K;
        g.ldb = N;
        g.ldc = N;
        arg(s.inId(0));
        arg(s.inId(1));
      }
    }
    g.strideC = g.M * g.N;
  }
  if (accumulate) { // C is the accumulator the absorbed Add wrote
    g.accumulate = true;
    arg(accumulate->outputs[0]);
  } else if (gelu) { // C is the absorbed instruction's (first) output
    arg(gelu->outputs[0]);
  } else {
    arg(s.outId(0));
  }
  if (g.bias)
    arg(s.inId(2));
  if (gelu && gelu->op == rt::Opcode::BiasGelu) {
    // gelu(x W + bias) into BiasGelu's y, x W + bias into the Linear's
    // output: what the gradient's epilogue reads.
    g.epilogue = GemmEpilogue::GeluAuxBias;
    g.bias = true;
    g.biasType = P.buffers[size_t(gelu->inputs[1])].dtype;
    arg(gelu->inputs[1]);
    arg(s.outId(0));
  } else if (gelu) {
    // BiasGeluGrad(dy, h, bias) -> dx, dbias: dx = (dy) * gelu'(h) into
    // its dx, its column sums into dbias.
    g.epilogue = GemmEpilogue::DGeluBiasGrad;
    g.bias = true;
    g.biasType = P.buffers[size_t(gelu->outputs[1])].dtype;
    arg(gelu->outputs[1]);
    arg(gelu->inputs[1]);
  }
  if (biasGrad) {
    // dy's sums over the rows: dy is A (a [N, K] weight) or B.
    g.epilogue = d.transW ? GemmEpilogue::BiasGradFromA
                          : GemmEpilogue::BiasGradFromB;
    g.bias = true;
    g.biasType = Storage::F32;
    arg(biasGrad->outputs[0]);
  }
  if (gelu)
    g.auxType = P.buffers[size_t(step.args[4].buffers[0])].dtype;
  g.a = P.buffers[size_t(step.args[0].buffers[0])].dtype;
  g.b = P.buffers[size_t(step.args[1].buffers[0])].dtype;
  g.c = P.buffers[size_t(step.args[2].buffers[0])].dtype;
  if (!rt::isFloat(g.a) || !rt::isFloat(g.b) || !rt::isFloat(g.c))
    s.fail("GEMM operands must be floating point");
  auto it = std::find(M.gemms.begin(), M.gemms.end(), g);
  step.index = int(it - M.gemms.begin());
  if (it == M.gemms.end())
    M.gemms.push_back(g);
  return step;
}

std::string replaceAll(std::string s, const std::string &from,
                       const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

int Emitter::addLauncher(KernelSpec &spec) {
  // Identical code, parameters and launches: one launcher.
  std::ostringstream key;
  key << int(spec.launcher.op) << "|" << spec.device << "|"
      << spec.launcher.scratchBytes;
  for (const Param &p : spec.launcher.params)
    key << "|" << int(p.kind) << p.ctype << p.name << p.tableSize;
  for (const KernelLaunch &k : spec.launcher.kernels) {
    key << "|" << k.grid << "," << k.block;
    for (int a : k.args)
      key << "," << a;
  }
  for (const std::string &r : spec.reasons)
    key << "|" << r;
  auto [it, inserted] =
      launcherByKey.emplace(key.str(), int(M.launchers.size()));
  if (!inserted)
    return it->second;
  Launcher L = spec.launcher;
  L.summary = spec.opName;
  for (size_t i = 0; i < L.params.size(); ++i) {
    const Param &p = L.params[i];
    if (p.kind == Param::Kind::Buffer) {
      const int id = spec.args[i].buffers[0];
      L.summary += " " + p.name + rt::shapeStr(P.buffers[size_t(id)].shape) +
                   ":" + rt::dtypeName(P.buffers[size_t(id)].dtype);
    } else if (p.kind == Param::Kind::Table) {
      L.summary += " " + p.name + "{" + std::to_string(p.tableSize) +
                   " f32 tensors}";
    }
  }
  L.name = "dsc_" + spec.opName + "_" + std::to_string(perOpcode[L.op]++);
  std::string device = replaceAll(spec.device, "$K", L.name);
  for (size_t r = 0; r < spec.reasons.size(); ++r) {
    M.statusMessages.push_back(L.name + ": " + spec.reasons[r]);
    device = replaceAll(device, "$S" + std::to_string(r) + "u",
                        std::to_string(M.statusMessages.size() - 1) + "u");
  }
  for (KernelLaunch &k : L.kernels)
    k.kernel = replaceAll(k.kernel, "$K", L.name);
  M.scratchBytes = std::max(M.scratchBytes, L.scratchBytes);
  M.launchers.push_back(L);
  launcherDevice.push_back(device);
  return it->second;
}

void Emitter::emitVocabParallel(const rt::Instr &I, size_t i,
                                std::vector<Step> &steps) {
  const rt::InstrDims d = rt::checkInstr(P, I);
  auto phase = [&](int k) {
    KernelSpec spec(P, I);
    emitVocabPhase(spec, d, k);
    Step s;
    s.kind = Step::Kind::Kernel;
    s.instrs.push_back(i);
    s.index = addLauncher(spec);
    s.args = spec.args;
    steps.push_back(s);
  };
  // An in-place f32 all-reduce over the instruction's group: of `buffer`,
  // or (buffer -1) of `floats` floats of the scratch from float `at`.
  auto allReduce = [&](rt::ReduceOp op, int64_t floats, int buffer,
                       int64_t at) {
    Step s;
    s.kind = Step::Kind::Collective;
    s.instrs.push_back(i);
    s.collective.op = rt::Opcode::AllReduce;
    s.collective.axis = d.axis;
    s.collective.group = d.group;
    s.collective.count = floats;
    s.collective.reduce = op;
    s.args.resize(2);
    if (buffer >= 0)
      s.args[0].buffers = s.args[1].buffers = {buffer};
    else
      s.scratchOffset = at * 4;
    steps.push_back(s);
  };
  const int64_t rows = d.rows;
  switch (I.op) {
  case rt::Opcode::VocabEmbedding:
    phase(0);
    allReduce(rt::ReduceOp::Sum, d.rows * d.cols, I.outputs[0], 0);
    return;
  case rt::Opcode::VocabEmbeddingGrad:
    phase(0);
    return;
  default: // the loss (mx, sum, target in the scratch) or its gradient
    phase(0);
    allReduce(rt::ReduceOp::Max, rows, -1, 0);
    phase(1);
    allReduce(rt::ReduceOp::Sum,
              I.op == rt::Opcode::VocabCrossEntropy ? 2 * rows : rows, -1,
              rows);
    phase(2);
  }
}

void Emitter::emitFunction(const rt::Function &fn) {
  indexUses(fn);
  std::vector<Step> &steps = M.steps[fn.name];
  std::set<size_t> absorbed; ///< what GEMMs perform (accumulatingAdd, epilogues)
  findBiasGradEpilogues(fn);
  for (const auto &[gemm, reduce] : biasGrads)
    absorbed.insert(reduce);
  const std::map<size_t, size_t> gelu = geluEpilogues(fn);
  for (const auto &[at, other] : gelu)
    absorbed.insert(other);
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const rt::Instr &I = fn.body[i];
    if (absorbed.count(i))
      continue;
    if (I.host || I.op == rt::Opcode::ToHost || I.op == rt::Opcode::ToDevice) {
      // ZeRO-Offload: the backend runs a host instruction with the CPU
      // backend's kernels over its host memory, and copies between the
      // memories (lanes: include/dsc/Codegen/StepLanes.h).
      Step s;
      s.kind = I.host ? Step::Kind::Host : Step::Kind::HostCopy;
      s.instrs.push_back(i);
      if (!I.host) {
        s.args.resize(2);
        s.args[0].buffers = {I.inputs.at(0)};
        s.args[1].buffers = {I.outputs.at(0)};
      }
      steps.push_back(s);
      continue;
    }
    if (auto it = gelu.find(i); it != gelu.end()) {
      // A GEMM with its GELU epilogue: I is the Linear (its BiasGelu
      // next) or the BiasGeluGrad (its LinearGradInput before).
      const bool forward = I.op == rt::Opcode::Linear;
      const rt::Instr &gemm = forward ? I : fn.body[it->second];
      const rt::Instr &epilogue = forward ? fn.body[it->second] : I;
      Step s = gemmStep(gemm, nullptr, &epilogue);
      s.instrs = {std::min(i, it->second), std::max(i, it->second)};
      steps.push_back(s);
      continue;
    }
    switch (routeOf(I.op)) {
    case Route::Gemm: {
      const std::optional<size_t> add = accumulatingAdd(fn, i);
      const auto biasGrad = biasGrads.find(i);
      const bool fusedBias = biasGrad != biasGrads.end();
      Step s = gemmStep(I, add ? &fn.body[*add] : nullptr, nullptr,
                        fusedBias ? &fn.body[biasGrad->second] : nullptr);
      s.instrs.push_back(i);
      if (add) {
        s.instrs.push_back(*add);
        absorbed.insert(*add);
      }
      if (fusedBias)
        s.instrs.push_back(biasGrad->second);
      steps.push_back(s);
      break;
    }
    case Route::Collective: {
      if (I.op == rt::Opcode::VocabEmbedding ||
          I.op == rt::Opcode::VocabEmbeddingGrad ||
          I.op == rt::Opcode::VocabCrossEntropy ||
          I.op == rt::Opcode::VocabCrossEntropyGrad) {
        emitVocabParallel(I, i, steps);
        break;
      }
      if ((I.op == rt::Opcode::AllReduce || I.op == rt::Opcode::TpReduce) &&
          P.buffers[size_t(I.inputs[0])].dtype != Storage::F32) {
        KernelSpec spec(P, I);
        spec.fail("all-reduces run on f32 buffers");
      }
      Step s;
      s.kind = Step::Kind::Collective;
      s.instrs.push_back(i);
      s.collective = rt::DeviceCollective::of(P, I);
      s.args.resize(2);
      if (I.op == rt::Opcode::MoeExchangeCounts ||
          I.op == rt::Opcode::MoeExchange) {
        // The counts travel with the rows (runDeviceExpertExchange).
        s.args[0].buffers = I.inputs;
        s.args[1].buffers = I.outputs;
      } else {
        if (!I.inputs.empty())
          s.args[0].buffers = {I.inputs[0]};
        if (!I.outputs.empty())
          s.args[1].buffers = {I.outputs[0]};
      }
      steps.push_back(s);
      break;
    }
    case Route::Copy: {
      KernelSpec spec(P, I);
      if (spec.inType(0) == spec.outType(0)) {
        Step s;
        s.kind = Step::Kind::Memcpy;
        s.instrs.push_back(i);
        s.args.resize(2);
        s.args[0].buffers = {spec.inId(0)};
        s.args[1].buffers = {spec.outId(0)};
        steps.push_back(s);
        break;
      }
      emitKernel(spec); // a copy between storage types: a conversion
      Step s;
      s.kind = Step::Kind::Kernel;
      s.instrs.push_back(i);
      s.index = addLauncher(spec);
      s.args = spec.args;
      steps.push_back(s);
      break;
    }
    case Route::Optimizer: {
      // The maximal run of optimizer updates starting here, if they are
      // independent (none reads what another writes), is partitioned by
      // (opcode, attributes, scalar inputs); each part is one multi-tensor
      // launch per 32 tensors. Otherwise (or malformed) one at a time.
      size_t j = i;
      while (j < fn.body.size() && !fn.body[j].host &&
             routeOf(fn.body[j].op) == Route::Optimizer)
        ++j;
      std::set<int> written;
      bool independent = true;
      for (size_t k = i; k < j; ++k)
        for (int id : fn.body[k].outputs)
          written.insert(id);
      for (size_t k = i; k < j && independent; ++k) {
        const rt::Instr &J = fn.body[k];
        const size_t tensors = size_t(rt::opInfo(J.op).minOuts) + 1;
        for (size_t q = 0; q < J.inputs.size(); ++q) {
          const bool own = q < tensors && q != 1 &&
                           std::count(J.outputs.begin(), J.outputs.end(),
                                      J.inputs[q]);
          if (written.count(J.inputs[q]) && !own)
            independent = false;
        }
      }
      if (!independent)
        j = i + 1;
      std::vector<std::vector<size_t>> parts;
      for (size_t k = i; k < j; ++k) {
        const rt::Instr &J = fn.body[k];
        // Inputs from here on are lr, step, gscale[, skip] (Ops.def).
        const size_t scalars = size_t(rt::opInfo(J.op).minOuts) + 1;
        auto same = [&](const rt::Instr &F) {
          return F.op == J.op && F.attrs == J.attrs &&
                 F.inputs.size() == J.inputs.size() &&
                 J.inputs.size() >= scalars &&
                 std::equal(J.inputs.begin() + long(scalars), J.inputs.end(),
                            F.inputs.begin() + long(scalars));
        };
        auto part = std::find_if(parts.begin(), parts.end(), [&](auto &p) {
          return same(fn.body[p.front()]);
        });
        if (part == parts.end())
          parts.push_back({k});
        else
          part->push_back(k);
      }
      for (const std::vector<size_t> &part : parts)
        for (size_t g0 = 0; g0 < part.size(); g0 += 32) {
          std::vector<const rt::Instr *> group;
          Step s;
          s.kind = Step::Kind::Kernel;
          for (size_t k = g0; k < std::min(part.size(), g0 + 32); ++k) {
            group.push_back(&fn.body[part[k]]);
            s.instrs.push_back(part[k]);
          }
          KernelSpec spec(P, *group[0]);
          emitOptimizerGroup(spec, group);
          s.index = addLauncher(spec);
          s.args = spec.args;
          steps.push_back(s);
        }
      i = j - 1;
      break;
    }
    case Route::Kernel: {
      KernelSpec spec(P, I);
      if (I.op == rt::Opcode::Attention || I.op == rt::Opcode::AttentionGrad) {
        const rt::InstrDims d = rt::checkInstr(P, I);
        // Agreed: cuDNN, were it loaded, could run this attention and its
        // forward or gradient.
        const bool agreed = !cudnnRefused.count(lseOf(I));
        if (!options.cudnn && !options.forceAttention && agreed)
          ++M.cudnnCandidates;
        spec.attention = chooseAttention(spec, d, options, agreed);
        const CudnnAttention problem = cudnnAttentionOf(spec, d);
        M.attentionChoices.push_back(
            "@" + fn.name + " #" + std::to_string(i) + " " +
            rt::opcodeName(I.op) + ": " + attentionKernelName(spec.attention) +
            " (" + describeAttention(problem) + ")");
        if (spec.attention == AttentionKernel::Cudnn) {
          Step s;
          s.kind = Step::Kind::Attention;
          s.instrs.push_back(i);
          s.index = int(M.attentions.size());
          M.attentions.push_back(problem);
          for (size_t k = 0; k < I.inputs.size(); ++k)
            s.args.push_back({{spec.inId(k)}, 0});
          for (size_t k = 0; k < I.outputs.size(); ++k)
            s.args.push_back({{spec.outId(k)}, 0});
          steps.push_back(s);
          break;
        }
      }
      emitKernel(spec);
      Step s;
      s.kind = Step::Kind::Kernel;
      s.instrs.push_back(i);
      s.index = addLauncher(spec);
      s.args = spec.args;
      steps.push_back(s);
      break;
    }
    }
  }
}

std::string launcherSignature(const Launcher &L) {
  std::string sig = "cudaError_t " + L.name + "(";
  for (const Param &p : L.params)
    sig += p.ctype + (p.ctype.back() == '*' ? "" : " ") + p.name + ", ";
  return sig + "cudaStream_t cuda_stream)";
}

void Emitter::writeSource() {
  std::ostringstream os;
  os << "// Generated by dsc-translate --emit-cuda. Do not edit.\n"
     << "// " << M.launchers.size() << " launchers, " << M.gemms.size()
     << " GEMM descriptors (see the header). Kernels compile under NVRTC;\n"
     << "// the host launchers below need nvcc.\n\n";
  os << deviceLibrary() << "\n";
  os << "//===--- Kernels "
        "------------------------------------------------------===//\n\n";
  for (size_t i = 0; i < M.launchers.size(); ++i)
    os << "// " << M.launchers[i].name << ": " << M.launchers[i].summary
       << "\n"
       << launcherDevice[i] << "\n";
  os << "//===--- Host launchers (C ABI) "
        "---------------------------------------===//\n\n"
     << "#ifndef __CUDACC_RTC__\n#include \"" << options.headerName
     << "\"\n\n";
  for (const Launcher &L : M.launchers) {
    os << "extern \"C\" " << launcherSignature(L) << " {\n";
    for (const Param &p : L.params)
      if (p.kind == Param::Kind::Table)
        os << "  dsc::Ptrs<" << p.tableSize << "> " << p.name << "_t;\n"
           << "  for (int i = 0; i < " << p.tableSize << "; ++i)\n"
           << "    " << p.name << "_t.p[i] = const_cast<float *>(" << p.name
           << "[i]);\n";
    for (const KernelLaunch &k : L.kernels) {
      os << "  " << k.kernel << "<<<" << k.grid << ", " << k.block
         << ", 0, cuda_stream>>>(";
      for (size_t a = 0; a < k.args.size(); ++a) {
        const Param &p = L.params[size_t(k.args[a])];
        os << (a ? ", " : "") << p.name
           << (p.kind == Param::Kind::Table ? "_t" : "");
      }
      os << ");\n";
    }
    os << "  return cudaGetLastError();\n}\n\n";
  }
  os << "#endif // __CUDACC_RTC__\n";
  M.source = os.str();
}

void Emitter::writeHeader() {
  std::ostringstream os;
  os << "// Generated by dsc-translate --emit-cuda. Do not edit.\n"
     << "//\n"
     << "// C-ABI launchers of the kernels in the matching .cu. Every buffer\n"
     << "// must be 16-byte aligned; a launcher with a `dsc_scratch`\n"
     << "// parameter needs DSC_SCRATCH_BYTES of device workspace; `seed` and\n"
     << "// `offset` are the Philox key and counter offset of the call (see\n"
     << "// include/dsc/Support/Philox.h). After a step, a non-zero\n"
     << "// `dsc_status` device variable indexes dsc_status_messages.\n"
     << "#ifndef DSC_GENERATED_KERNELS_H\n#define DSC_GENERATED_KERNELS_H\n\n"
     << "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"
     << "#include <cuda_runtime.h>\n\n"
     << "#define DSC_SCRATCH_BYTES " << M.scratchBytes << "\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  for (const Launcher &L : M.launchers)
    os << "/* " << L.summary << " */\n" << launcherSignature(L) << ";\n";
  os << "\n/* GEMMs for cuBLASLt, row-major: C[b] = alpha * op(A[b]) op(B[b])\n"
     << "   (+ bias[n] per row), f32 accumulation; types: 0 f32, 1 f16,\n"
     << "   2 bf16. A row whose comment names a cuBLASLt epilogue runs it\n"
     << "   instead: its bias is what that epilogue reads or writes (a bias\n"
     << "   gradient: the sums of dy, of length N of the weight). */\n"
     << "typedef struct {\n  long long batch, m, n, k;\n"
     << "  int trans_a, trans_b;\n"
     << "  long long lda, ldb, ldc, stride_a, stride_b, stride_c;\n"
     << "  double alpha;\n  int bias, type_a, type_b, type_c, type_bias;\n"
     << "} dsc_gemm_desc;\n\n"
     << "static const dsc_gemm_desc dsc_gemms[" << std::max<size_t>(1, M.gemms.size())
     << "] = {\n";
  auto ty = [](Storage s) {
    return s == Storage::F16 ? 1 : s == Storage::BF16 ? 2 : 0;
  };
  for (const Gemm &g : M.gemms)
    os << "  {" << g.batch << ", " << g.M << ", " << g.N << ", " << g.K
       << ", " << g.transA << ", " << g.transB << ", " << g.lda << ", "
       << g.ldb << ", " << g.ldc << ", " << g.strideA << ", " << g.strideB
       << ", " << g.strideC << ", " << dbl(g.alpha) << ", " << g.bias << ", "
       << ty(g.a) << ", " << ty(g.b) << ", " << ty(g.c) << ", "
       << ty(g.biasType) << "}, /* " << rt::opcodeName(g.op)
       << (g.accumulate ? ", C += (beta 1)" : "")
       << (g.epilogue == GemmEpilogue::GeluAuxBias
               ? ", epilogue GELU_AUX_BIAS (aux: x W + bias)"
           : g.epilogue == GemmEpilogue::DGeluBiasGrad
               ? ", epilogue DGELU_BGRAD (bias: the bias gradient)"
           : g.epilogue == GemmEpilogue::BiasGradFromA
               ? ", epilogue BGRADB (bias: the bias gradient, sums of dy)"
           : g.epilogue == GemmEpilogue::BiasGradFromB
               ? ", epilogue BGRADA (bias: the bias gradient, sums of dy)"
               : "")
       << " */\n";
  if (M.gemms.empty())
    os << "  {0}\n";
  os << "};\n\n";
  if (!M.attentions.empty()) {
    auto strides = [](const std::array<int64_t, 4> &st) {
      return "(" + std::to_string(st[0]) + ", " + std::to_string(st[1]) +
             ", " + std::to_string(st[2]) + ", " + std::to_string(st[3]) + ")";
    };
    os << "/* cuDNN fused attention (the backend's SDPA graphs): element\n"
       << "   strides (batch, head, seq, dim) of q, out and their gradients,\n"
       << "   of k, v and theirs; lse f32 [B, H, T].\n";
    for (size_t i = 0; i < M.attentions.size(); ++i) {
      const CudnnAttention &a = M.attentions[i];
      char scale[32];
      std::snprintf(scale, sizeof scale, "%g", a.scale);
      os << "   " << i << ": " << describeAttention(a) << " scale " << scale
         << " stream " << a.stream << "; q "
         << strides(attentionStrides(a.heads, a.seq, a.headDim)) << ", kv "
         << strides(attentionStrides(a.kvHeads, a.seq, a.headDim)) << "\n";
    }
    os << "*/\n\n";
  }
  os << "static const char *const dsc_status_messages[] = {\n"
     << "  \"ok\",\n";
  for (size_t i = 1; i < M.statusMessages.size(); ++i)
    os << "  \"" << M.statusMessages[i] << "\",\n";
  os << "};\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  M.header = os.str();
}

Module Emitter::run() {
  M.statusMessages.push_back("ok");
  // A fused attention's gradient reads its forward's statistics (lse);
  // cuDNN runs both or neither (its statistics and dropout masks are its
  // own).
  EmitOptions withCudnn = options;
  withCudnn.cudnn = true;
  for (const auto &[name, fn] : P.functions)
    for (const rt::Instr &I : fn.body)
      if (I.op == rt::Opcode::Attention || I.op == rt::Opcode::AttentionGrad) {
        KernelSpec spec(P, I);
        if (!whyNotCudnn(spec, rt::checkInstr(P, I), withCudnn).empty())
          cudnnRefused.insert(lseOf(I));
      }
  functionsUsing.assign(P.buffers.size(), 0);
  for (const auto &[name, fn] : P.functions) {
    indexUses(fn);
    for (int id : indexed)
      ++functionsUsing[size_t(id)];
  }
  for (const auto &[name, fn] : P.functions)
    emitFunction(fn);
  writeSource();
  writeHeader();
  return std::move(M);
}

} // namespace

bool parseAttentionKernel(const std::string &name, AttentionKernel &kernel) {
  for (AttentionKernel k : {AttentionKernel::Tiles, AttentionKernel::Registers,
                            AttentionKernel::Cudnn})
    if (name == attentionKernelName(k)) {
      kernel = k;
      return true;
    }
  return false;
}

std::string parseEpilogues(const std::string &value, EmitOptions &options) {
  options.geluEpilogues = options.biasGradEpilogues = false;
  if (value.empty() || value == "0")
    return "";
  if (value == "1" || value == "all") {
    options.geluEpilogues = options.biasGradEpilogues = true;
    return "";
  }
  for (size_t start = 0; start <= value.size();) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos)
      comma = value.size();
    const std::string item = value.substr(start, comma - start);
    start = comma + 1;
    if (item == "gelu")
      options.geluEpilogues = true;
    else if (item == "bgrad")
      options.biasGradEpilogues = true;
    else
      return "'" + item +
             "' is not an epilogue (1, all, or a list of gelu and bgrad)";
  }
  return "";
}

const char *attentionKernelName(AttentionKernel kernel) {
  switch (kernel) {
  case AttentionKernel::Tiles:
    return "tiles";
  case AttentionKernel::Registers:
    return "registers";
  case AttentionKernel::Cudnn:
    return "cudnn";
  }
  return "?";
}

std::string describeAttention(const CudnnAttention &a) {
  std::string s = std::string(a.backward ? "backward " : "forward ") +
                  rt::dtypeName(a.type) + " B" + std::to_string(a.batch) +
                  " H" + std::to_string(a.heads) + "/" +
                  std::to_string(a.kvHeads) + " T" + std::to_string(a.seq) +
                  " D" + std::to_string(a.headDim);
  if (a.causal)
    s += " causal";
  char rate[32];
  std::snprintf(rate, sizeof rate, " dropout %g", a.rate);
  return a.rate > 0.0 ? s + rate : s;
}

std::array<int64_t, 4> attentionStrides(int64_t heads, int64_t seq,
                                        int64_t headDim) {
  return {heads * seq * headDim, seq * headDim, headDim, 1};
}

Module emitCuda(const rt::Program &program, const EmitOptions &options) {
  return Emitter(program, options).run();
}

} // namespace dsc::cuda
