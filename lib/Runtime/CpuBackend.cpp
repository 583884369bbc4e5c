//===- CpuBackend.cpp - Executes a Program function on the CPU -----------===//
//
// Each instruction is validated (buffer ids, dtypes, element counts; cheap
// checks only) and dispatched to a kernel of CpuKernels.cpp. Every error is an
// rt::Error whose message starts with the opcode name.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "MixedPrecisionKernels.h"

#include "dsc/Runtime/Broadcast.h"
#include "dsc/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <cstring>
#include <sstream>

namespace dsc::rt {

namespace {

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// Validation and typed access for one instruction.
class Exec {
public:
  Exec(const Program &prog, Storage &st, const Instr &instr)
      : P(prog), S(st), I(instr), op(opcodeName(instr.op)) {}

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(std::string(op) + ": " + msg);
  }

  void numIns(size_t lo, size_t hi) const {
    if (I.inputs.size() < lo || I.inputs.size() > hi)
      fail("expects " +
           (lo == hi ? std::to_string(lo)
                     : std::to_string(lo) + ".." + std::to_string(hi)) +
           " inputs, got " + std::to_string(I.inputs.size()));
  }
  void numIns(size_t n) const { numIns(n, n); }
  void numOuts(size_t n) const {
    if (I.outputs.size() != n)
      fail("expects " + std::to_string(n) + " outputs, got " +
           std::to_string(I.outputs.size()));
  }

  int checkId(int id) const {
    if (id < 0 || size_t(id) >= P.buffers.size())
      fail("buffer id " + std::to_string(id) + " out of range (program has " +
           std::to_string(P.buffers.size()) + " buffers)");
    return id;
  }
  int inId(size_t k) const { return checkId(I.inputs.at(k)); }
  int outId(size_t k) const { return checkId(I.outputs.at(k)); }
  const Buffer &in(size_t k) const { return P.buffers[size_t(inId(k))]; }
  const Buffer &out(size_t k) const { return P.buffers[size_t(outId(k))]; }

  void dtype(const Buffer &b, DType t, const char *role) const {
    if (b.dtype != t)
      fail(std::string(role) + " '" + b.name + "' must be " + dtypeName(t) +
           ", got " + dtypeName(b.dtype));
  }
  void count(const Buffer &b, int64_t n, const char *role) const {
    if (b.numElements() != n)
      fail(std::string(role) + " '" + b.name + "' " + shapeStr(b.shape) +
           " has " + std::to_string(b.numElements()) + " elements, expected " +
           std::to_string(n));
  }
  int64_t lastDim(const Buffer &b, const char *role) const {
    if (b.shape.empty())
      fail(std::string(role) + " '" + b.name + "' must have rank >= 1");
    return b.shape.back();
  }

  const float *fin(size_t k, const char *role) {
    dtype(in(k), DType::F32, role);
    return S.f32(inId(k));
  }
  float *fout(size_t k, const char *role) {
    dtype(out(k), DType::F32, role);
    return S.f32(outId(k));
  }
  const int32_t *iin(size_t k, const char *role) {
    dtype(in(k), DType::I32, role);
    return S.i32(inId(k));
  }
  int32_t *iout(size_t k, const char *role) {
    dtype(out(k), DType::I32, role);
    return S.i32(outId(k));
  }
  float scalarIn(size_t k, const char *role) {
    count(in(k), 1, role);
    return fin(k, role)[0];
  }
  /// The optimizer step counter: an i64 scalar (i32 accepted too).
  int64_t stepIn(size_t k) {
    const Buffer &b = in(k);
    count(b, 1, "step");
    if (b.dtype == DType::I64)
      return S.i64(inId(k))[0];
    if (b.dtype == DType::I32)
      return S.i32(inId(k))[0];
    fail("step '" + b.name + "' must be i64, got " + dtypeName(b.dtype));
  }
  /// Copies input k into output j when they are different buffers, so that an
  /// in-place kernel can run on the output.
  float *inPlace(size_t k, size_t j, const char *role) {
    const float *src = fin(k, role);
    float *dst = fout(j, role);
    count(out(j), in(k).numElements(), role);
    if (dst != src)
      cpu::copyBytes(dst, src, size_t(in(k).numElements()) * 4);
    return dst;
  }

  const Program &P;
  Storage &S;
  const Instr &I;
  const char *op;
};

/// With DSC_PROFILE set, the backend times every instruction and prints the
/// time per opcode to stderr when it is destroyed.
class OpcodeProfile {
public:
  void add(Opcode op, double seconds) {
    auto &[total, calls] = entries[op];
    total += seconds;
    ++calls;
  }
  ~OpcodeProfile() {
    if (entries.empty())
      return;
    std::vector<std::pair<double, Opcode>> order;
    double all = 0;
    for (auto &[op, entry] : entries) {
      order.push_back({entry.first, op});
      all += entry.first;
    }
    std::sort(order.rbegin(), order.rend());
    std::fprintf(stderr, "dsc cpu profile: %.3f s in %zu opcodes\n", all,
                 order.size());
    for (auto &[seconds, op] : order)
      std::fprintf(stderr, "  %-18s %9.3f s %5.1f%% %8lld calls\n",
                   opcodeName(op), seconds, 100 * seconds / all,
                   (long long)entries[op].second);
  }

private:
  std::map<Opcode, std::pair<double, int64_t>> entries;
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(Communicator &comm)
      : comm(comm), profile(std::getenv("DSC_PROFILE")
                                ? std::make_unique<OpcodeProfile>()
                                : nullptr) {
    cpu::configureBlasThreads();
  }
  const char *name() const override { return "cpu"; }

  void run(const Program &program, const Function &fn, Storage &storage,
           const RngContext &rng) override {
    for (const Instr &instr : fn.body) {
      if (!profile) {
        execute(program, storage, instr, rng);
        continue;
      }
      auto start = std::chrono::steady_clock::now();
      execute(program, storage, instr, rng);
      profile->add(instr.op, std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count());
    }
  }

private:
  void execute(const Program &P, Storage &S, const Instr &I,
               const RngContext &rng);
  Communicator &comm;
  std::unique_ptr<OpcodeProfile> profile;
};

void CpuBackend::execute(const Program &P, Storage &S, const Instr &I,
                         const RngContext &rng) {
  Exec e(P, S, I);
  switch (I.op) {
  case Opcode::Fill: {
    e.numIns(0);
    e.numOuts(1);
    const Buffer &o = e.out(0);
    double v = I.getFloat("value");
    if (o.dtype == DType::F32)
      cpu::fillF32(S.f32(e.outId(0)), o.numElements(), float(v));
    else if (o.dtype == DType::I32)
      cpu::fillI32(S.i32(e.outId(0)), o.numElements(), int32_t(v));
    else {
      int64_t *p = S.i64(e.outId(0));
      for (int64_t i = 0; i < o.numElements(); ++i)
        p[i] = int64_t(v);
    }
    return;
  }
  case Opcode::Iota: {
    e.numIns(0);
    e.numOuts(1);
    int32_t *o = e.iout(0, "output");
    cpu::iota(o, e.out(0).numElements(), I.getInt("start"), I.getInt("step"));
    return;
  }
  case Opcode::Embedding: {
    e.numIns(2);
    e.numOuts(1);
    const Buffer &t = e.in(0);
    if (t.shape.size() != 2)
      e.fail("table '" + t.name + "' must be [V,C], got " + shapeStr(t.shape));
    const int64_t V = t.shape[0], C = t.shape[1];
    const int64_t rows = e.in(1).numElements();
    e.count(e.out(0), rows * C, "output");
    const float *table = e.fin(0, "table");
    const int32_t *ids = e.iin(1, "ids");
    cpu::embedding(table, ids, e.fout(0, "output"), rows, V, C);
    return;
  }
  case Opcode::EmbeddingGrad: {
    e.numIns(2);
    e.numOuts(1);
    const Buffer &t = e.out(0);
    if (t.shape.size() != 2)
      e.fail("dtable '" + t.name + "' must be [V,C], got " + shapeStr(t.shape));
    const int64_t V = t.shape[0], C = t.shape[1];
    const int64_t rows = e.in(0).numElements();
    e.count(e.in(1), rows * C, "dy");
    const int32_t *ids = e.iin(0, "ids");
    const float *dy = e.fin(1, "dy");
    cpu::embeddingGrad(ids, dy, e.fout(0, "dtable"), rows, V, C);
    return;
  }
  case Opcode::Add: {
    e.numIns(2);
    e.numOuts(1);
    const Buffer &a = e.in(0), &b = e.in(1);
    if (!broadcastable(a.shape, b.shape))
      e.fail("cannot broadcast '" + b.name + "' " + shapeStr(b.shape) +
             " to '" + a.name + "' " + shapeStr(a.shape));
    e.count(e.out(0), a.numElements(), "output");
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    cpu::addBroadcast(pa, pb, e.fout(0, "output"), a.shape, b.shape);
    return;
  }
  case Opcode::ReduceTo: {
    e.numIns(1);
    e.numOuts(1);
    const Buffer &x = e.in(0), &o = e.out(0);
    if (!broadcastable(x.shape, o.shape))
      e.fail("output '" + o.name + "' " + shapeStr(o.shape) +
             " does not broadcast to input '" + x.name + "' " +
             shapeStr(x.shape));
    const float *px = e.fin(0, "input");
    float *po = e.fout(0, "output");
    if (px == po)
      e.fail("output must not alias the input");
    cpu::reduceTo(px, po, x.shape, o.shape);
    return;
  }
  case Opcode::Linear:
  case Opcode::LinearGradInput:
  case Opcode::LinearGradWeight: {
    const bool tw = I.has("transpose_w") && I.getInt("transpose_w") != 0;
    const bool fwd = I.op == Opcode::Linear;
    if (fwd)
      e.numIns(2, 3);
    else
      e.numIns(2);
    e.numOuts(1);
    const Buffer &w = I.op == Opcode::LinearGradWeight ? e.out(0) : e.in(1);
    if (w.shape.size() != 2)
      e.fail("weight '" + w.name + "' must be rank 2, got " +
             shapeStr(w.shape));
    const int64_t K = tw ? w.shape[1] : w.shape[0];
    const int64_t N = tw ? w.shape[0] : w.shape[1];
    if (I.op == Opcode::Linear) {
      const Buffer &x = e.in(0);
      if (e.lastDim(x, "x") != K)
        e.fail("x '" + x.name + "' " + shapeStr(x.shape) +
               " does not match weight " + shapeStr(w.shape) +
               (tw ? " (transposed)" : ""));
      const int64_t M = K ? x.numElements() / K : 0;
      e.count(e.out(0), M * N, "output");
      const float *bias = nullptr;
      if (I.inputs.size() == 3) {
        e.count(e.in(2), N, "bias");
        bias = e.fin(2, "bias");
      }
      const float *px = e.fin(0, "x"), *pw = e.fin(1, "weight");
      cpu::linear(px, pw, bias, e.fout(0, "output"), M, K, N, tw);
    } else if (I.op == Opcode::LinearGradInput) {
      const Buffer &dy = e.in(0);
      if (e.lastDim(dy, "dy") != N)
        e.fail("dy '" + dy.name + "' " + shapeStr(dy.shape) +
               " does not match weight " + shapeStr(w.shape));
      const int64_t M = N ? dy.numElements() / N : 0;
      e.count(e.out(0), M * K, "dx");
      const float *pdy = e.fin(0, "dy"), *pw = e.fin(1, "weight");
      cpu::linearGradInput(pdy, pw, e.fout(0, "dx"), M, K, N, tw);
    } else {
      const Buffer &x = e.in(0), &dy = e.in(1);
      if (e.lastDim(x, "x") != K || e.lastDim(dy, "dy") != N)
        e.fail("x " + shapeStr(x.shape) + " and dy " + shapeStr(dy.shape) +
               " do not match dw " + shapeStr(w.shape));
      const int64_t M = K ? x.numElements() / K : 0;
      e.count(dy, M * N, "dy");
      const float *px = e.fin(0, "x"), *pdy = e.fin(1, "dy");
      cpu::linearGradWeight(px, pdy, e.fout(0, "dw"), M, K, N, tw);
    }
    return;
  }
  case Opcode::BatchMatmul: {
    e.numIns(2);
    e.numOuts(1);
    const Buffer &a = e.in(0), &b = e.in(1);
    if (a.shape.size() < 3 || b.shape.size() != a.shape.size())
      e.fail("operands must have equal rank >= 3, got " + shapeStr(a.shape) +
             " and " + shapeStr(b.shape));
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < a.shape.size(); ++i) {
      if (a.shape[i] != b.shape[i])
        e.fail("batch dims differ: " + shapeStr(a.shape) + " vs " +
               shapeStr(b.shape));
      batch *= a.shape[i];
    }
    const bool ta = I.has("transpose_a") && I.getInt("transpose_a") != 0;
    const bool tb = I.has("transpose_b") && I.getInt("transpose_b") != 0;
    const float alpha = I.has("alpha") ? float(I.getFloat("alpha")) : 1.0f;
    const size_t r = a.shape.size();
    const int64_t M = ta ? a.shape[r - 1] : a.shape[r - 2];
    const int64_t K = ta ? a.shape[r - 2] : a.shape[r - 1];
    const int64_t Kb = tb ? b.shape[r - 1] : b.shape[r - 2];
    const int64_t N = tb ? b.shape[r - 2] : b.shape[r - 1];
    if (K != Kb)
      e.fail("contraction dims differ: " + shapeStr(a.shape) +
             (ta ? "^T" : "") + " @ " + shapeStr(b.shape) + (tb ? "^T" : ""));
    e.count(e.out(0), batch * M * N, "output");
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    cpu::batchMatmul(pa, pb, e.fout(0, "output"), batch, M, N, K, ta, tb,
                     alpha);
    return;
  }
  case Opcode::LayerNorm:
  case Opcode::InvertibleLayerNorm: {
    const bool withRstd = I.op == Opcode::InvertibleLayerNorm;
    e.numIns(3);
    e.numOuts(withRstd ? 2 : 1);
    const Buffer &x = e.in(0);
    const int64_t C = e.lastDim(x, "x");
    const int64_t rows = C ? x.numElements() / C : 0;
    e.count(e.in(1), C, "gamma");
    e.count(e.in(2), C, "beta");
    e.count(e.out(0), x.numElements(), "output");
    float *rstd = nullptr;
    if (withRstd) {
      e.count(e.out(1), rows, "rstd");
      rstd = e.fout(1, "rstd");
    }
    const float *px = e.fin(0, "x"), *pg = e.fin(1, "gamma"),
                *pb = e.fin(2, "beta");
    cpu::layerNorm(px, pg, pb, e.fout(0, "output"), rows, C,
                   float(I.getFloat("epsilon")), rstd);
    return;
  }
  case Opcode::LayerNormGradFromOutput: {
    e.numIns(5, 6);
    e.numOuts(3);
    const Buffer &y = e.in(1);
    const int64_t C = e.lastDim(y, "y");
    const int64_t rows = C ? y.numElements() / C : 0;
    e.count(e.in(0), y.numElements(), "dy");
    e.count(e.in(2), C, "gamma");
    e.count(e.in(3), C, "beta");
    e.count(e.in(4), rows, "rstd");
    e.count(e.out(0), y.numElements(), "dx");
    e.count(e.out(1), C, "dgamma");
    e.count(e.out(2), C, "dbeta");
    const float *dres = nullptr;
    if (I.inputs.size() == 6) {
      e.count(e.in(5), y.numElements(), "residual gradient");
      dres = e.fin(5, "residual gradient");
    }
    cpu::layerNormGradFromOutput(
        e.fin(0, "dy"), e.fin(1, "y"), e.fin(2, "gamma"), e.fin(3, "beta"),
        e.fin(4, "rstd"), dres, e.fout(0, "dx"), e.fout(1, "dgamma"),
        e.fout(2, "dbeta"), rows, C);
    return;
  }
  case Opcode::LayerNormGrad: {
    e.numIns(3, 4);
    e.numOuts(3);
    const Buffer &x = e.in(1);
    const int64_t C = e.lastDim(x, "x");
    e.count(e.in(0), x.numElements(), "dy");
    e.count(e.in(2), C, "gamma");
    const float *dres = nullptr;
    if (I.inputs.size() == 4) {
      e.count(e.in(3), x.numElements(), "residual gradient");
      dres = e.fin(3, "residual gradient");
    }
    e.count(e.out(0), x.numElements(), "dx");
    e.count(e.out(1), C, "dgamma");
    e.count(e.out(2), C, "dbeta");
    const float *dy = e.fin(0, "dy"), *px = e.fin(1, "x"),
                *pg = e.fin(2, "gamma");
    float *dx = e.fout(0, "dx"), *dg = e.fout(1, "dgamma"),
          *db = e.fout(2, "dbeta");
    cpu::layerNormGrad(dy, px, pg, dres, dx, dg, db,
                       C ? x.numElements() / C : 0, C,
                       float(I.getFloat("epsilon")));
    return;
  }
  case Opcode::BiasDropoutAddLayerNorm: {
    e.numIns(5);
    e.numOuts(3);
    const Buffer &x = e.in(0);
    const int64_t C = e.lastDim(x, "input");
    const int64_t n = x.numElements(), rows = C ? n / C : 0;
    e.count(e.in(1), C, "bias");
    e.count(e.in(2), n, "residual");
    e.count(e.in(3), C, "gamma");
    e.count(e.in(4), C, "beta");
    e.count(e.out(0), n, "sum");
    e.count(e.out(1), n, "output");
    e.count(e.out(2), rows, "rstd");
    const double rate = I.getFloat("rate");
    if (!(rate >= 0.0 && rate < 1.0))
      e.fail("rate must be in [0, 1), got " + std::to_string(rate));
    cpu::biasDropoutAddLayerNorm(
        e.fin(0, "x"), e.fin(1, "bias"), e.fin(2, "residual"),
        e.fin(3, "gamma"), e.fin(4, "beta"), e.fout(0, "sum"),
        e.fout(1, "output"), e.fout(2, "rstd"), rows, C, rate,
        uint32_t(I.getInt("stream")), rng.seed, rng.offset,
        float(I.getFloat("epsilon")));
    return;
  }
  case Opcode::Gelu:
  case Opcode::GeluGrad: {
    const bool grad = I.op == Opcode::GeluGrad;
    e.numIns(grad ? 2 : 1);
    e.numOuts(1);
    const std::string approx =
        I.has("approximation") ? I.getString("approximation") : "tanh";
    if (approx != "tanh" && approx != "erf" && approx != "none")
      e.fail("approximation must be \"tanh\" or \"erf\", got \"" + approx +
             "\"");
    const bool useTanh = approx == "tanh";
    const int64_t n = e.in(0).numElements();
    e.count(e.out(0), n, "output");
    if (grad) {
      e.count(e.in(1), n, "x");
      const float *dy = e.fin(0, "dy"), *x = e.fin(1, "x");
      cpu::geluGrad(dy, x, e.fout(0, "dx"), n, useTanh);
    } else {
      const float *x = e.fin(0, "x");
      cpu::gelu(x, e.fout(0, "output"), n, useTanh);
    }
    return;
  }
  case Opcode::Dropout: {
    e.numIns(1);
    e.numOuts(1);
    const int64_t n = e.in(0).numElements();
    e.count(e.out(0), n, "output");
    const double rate = I.getFloat("rate");
    if (!(rate >= 0.0 && rate < 1.0))
      e.fail("rate must be in [0, 1), got " + std::to_string(rate));
    const float *x = e.fin(0, "x");
    cpu::dropout(x, e.fout(0, "output"), n, rate,
                 uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::BiasGelu:
  case Opcode::BiasGeluGrad:
  case Opcode::BiasDropoutAdd:
  case Opcode::DropoutBiasGrad: {
    // [rows, N] tensors with a bias [N]; inputs/outputs by opcode:
    //   BiasGelu(x, b) -> y            BiasGeluGrad(dy, x, b) -> dx, db
    //   BiasDropoutAdd(x, b, res) -> y  DropoutBiasGrad(dy) -> dx, db
    const bool grad =
        I.op == Opcode::BiasGeluGrad || I.op == Opcode::DropoutBiasGrad;
    const bool geluOp =
        I.op == Opcode::BiasGelu || I.op == Opcode::BiasGeluGrad;
    const size_t ins = I.op == Opcode::BiasGelu          ? 2
                       : I.op == Opcode::DropoutBiasGrad ? 1
                                                         : 3;
    e.numIns(ins);
    e.numOuts(grad ? 2 : 1);
    const Buffer &x = e.in(0);
    const int64_t N = e.lastDim(x, "input");
    const int64_t n = x.numElements(), rows = N ? n / N : 0;
    if (I.op == Opcode::BiasGeluGrad) {
      e.count(e.in(1), n, "x");
      e.count(e.in(2), N, "bias");
    } else if (ins > 1) {
      e.count(e.in(1), N, "bias");
      if (ins > 2)
        e.count(e.in(2), n, "residual");
    }
    e.count(e.out(0), n, "output");
    if (grad)
      e.count(e.out(1), N, "bias gradient");
    double rate = 0.0;
    if (!geluOp) {
      rate = I.getFloat("rate");
      if (!(rate >= 0.0 && rate < 1.0))
        e.fail("rate must be in [0, 1), got " + std::to_string(rate));
    }
    const uint32_t stream = geluOp ? 0 : uint32_t(I.getInt("stream"));
    const bool tanhApprox =
        geluOp && I.getString("approximation") != "erf";
    switch (I.op) {
    case Opcode::BiasGelu:
      cpu::biasGelu(e.fin(0, "x"), e.fin(1, "bias"), e.fout(0, "output"),
                    rows, N, tanhApprox);
      break;
    case Opcode::BiasGeluGrad:
      cpu::biasGeluGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fin(2, "bias"),
                        e.fout(0, "dx"), e.fout(1, "dbias"), rows, N,
                        tanhApprox);
      break;
    case Opcode::BiasDropoutAdd:
      cpu::biasDropoutAdd(e.fin(0, "x"), e.fin(1, "bias"),
                          e.fin(2, "residual"), e.fout(0, "output"), rows, N,
                          rate, stream, rng.seed, rng.offset);
      break;
    default:
      cpu::dropoutBiasGrad(e.fin(0, "dy"), e.fout(0, "dx"),
                           e.fout(1, "dbias"), rows, N, rate, stream,
                           rng.seed, rng.offset);
      break;
    }
    return;
  }
  case Opcode::SplitHeads:
  case Opcode::BiasSplitHeads:
  case Opcode::MergeHeads: {
    const bool split = I.op != Opcode::MergeHeads;
    const bool biased = I.op == Opcode::BiasSplitHeads;
    if (split) {
      e.numIns(biased ? 2 : 1);
      if (I.outputs.empty())
        e.fail("expects at least one output");
    } else {
      e.numOuts(1);
      if (I.inputs.empty())
        e.fail("expects at least one input");
    }
    const Buffer &x = split ? e.in(0) : e.out(0);
    const int64_t P = int64_t(split ? I.outputs.size() : I.inputs.size());
    if (x.shape.size() != 3)
      e.fail("'" + x.name + "' must be [B,T,P*H*D], got " + shapeStr(x.shape));
    const int64_t H = I.getInt("num_heads");
    const int64_t B = x.shape[0], T = x.shape[1], W = x.shape[2];
    if (H <= 0 || W % (P * H) != 0)
      e.fail("last dim " + std::to_string(W) + " of '" + x.name +
             "' is not divisible by " + std::to_string(P) + " parts x " +
             std::to_string(H) + " heads");
    const int64_t D = W / (P * H);
    for (int64_t p = 0; p < P; ++p) {
      const Buffer &h = split ? e.out(size_t(p)) : e.in(size_t(p));
      e.count(h, B * H * T * D, "head tensor");
    }
    if (split) {
      const float *px = e.fin(0, "x");
      const float *bias = nullptr;
      if (biased) {
        e.count(e.in(1), W, "bias");
        bias = e.fin(1, "bias");
      }
      std::vector<float *> outs;
      for (int64_t p = 0; p < P; ++p)
        outs.push_back(e.fout(size_t(p), "output"));
      cpu::splitHeads(px, bias, outs, B, T, H, D);
    } else {
      std::vector<const float *> ins;
      for (int64_t p = 0; p < P; ++p)
        ins.push_back(e.fin(size_t(p), "input"));
      cpu::mergeHeads(ins, e.fout(0, "output"), B, T, H, D);
    }
    return;
  }
  case Opcode::Concat:
  case Opcode::Split: {
    // The whole tensor and its pieces, viewed as [outer, width, inner].
    const bool concat = I.op == Opcode::Concat;
    const size_t pieces = concat ? I.inputs.size() : I.outputs.size();
    if (concat)
      e.numOuts(1);
    else
      e.numIns(1);
    if (pieces == 0)
      e.fail("expects at least one piece");
    const Buffer &whole = concat ? e.out(0) : e.in(0);
    const int64_t axis = I.getInt("axis");
    if (axis < 0 || axis >= int64_t(whole.shape.size()))
      e.fail("axis " + std::to_string(axis) + " out of range for " +
             shapeStr(whole.shape));
    int64_t outer = 1, inner = 1, total = 0;
    for (int64_t d = 0; d < axis; ++d)
      outer *= whole.shape[size_t(d)];
    for (size_t d = size_t(axis) + 1; d < whole.shape.size(); ++d)
      inner *= whole.shape[d];
    std::vector<int64_t> widths;
    for (size_t k = 0; k < pieces; ++k) {
      const Buffer &piece = concat ? e.in(k) : e.out(k);
      const int64_t width = piece.numElements() / std::max<int64_t>(1, outer * inner);
      e.count(piece, outer * width * inner, "piece");
      widths.push_back(width);
      total += width;
    }
    if (total != whole.shape[size_t(axis)])
      e.fail("pieces sum to " + std::to_string(total) + " along axis " +
             std::to_string(axis) + ", expected " +
             std::to_string(whole.shape[size_t(axis)]));
    if (concat) {
      std::vector<const float *> ins;
      for (size_t k = 0; k < pieces; ++k)
        ins.push_back(e.fin(k, "piece"));
      cpu::concat(ins, widths, e.fout(0, "output"), outer, inner);
    } else {
      std::vector<float *> outs;
      for (size_t k = 0; k < pieces; ++k)
        outs.push_back(e.fout(k, "piece"));
      cpu::split(e.fin(0, "input"), outs, widths, outer, inner);
    }
    return;
  }
  case Opcode::Softmax: {
    e.numIns(1);
    e.numOuts(1);
    const Buffer &x = e.in(0);
    const int64_t Tk = e.lastDim(x, "x");
    const int64_t Tq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
    e.count(e.out(0), x.numElements(), "output");
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const bool causal = I.has("causal") && I.getInt("causal") != 0;
    const float *px = e.fin(0, "x");
    cpu::softmax(px, e.fout(0, "output"), Tk ? x.numElements() / Tk : 0, Tq,
                 Tk, scale, causal);
    return;
  }
  case Opcode::SoftmaxDropout:
  case Opcode::SoftmaxDropoutGrad: {
    const bool grad = I.op == Opcode::SoftmaxDropoutGrad;
    e.numIns(grad ? 3 : 1);
    e.numOuts(grad ? 1 : 2);
    const Buffer &x = e.in(grad ? 1 : 0);
    const int64_t Tk = e.lastDim(x, "scores");
    const int64_t Tq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
    const int64_t rows = Tk ? x.numElements() / Tk : 0;
    if (grad) {
      e.count(e.in(0), x.numElements(), "dy");
      e.count(e.in(2), x.numElements(), "dropped");
    }
    for (size_t k = 0; k < I.outputs.size(); ++k)
      e.count(e.out(k), x.numElements(), "output");
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const double rate = I.getFloat("rate");
    if (!(rate >= 0.0 && rate < 1.0))
      e.fail("rate must be in [0, 1), got " + std::to_string(rate));
    if (grad)
      cpu::softmaxDropoutGrad(e.fin(0, "dy"), e.fin(1, "probs"),
                              e.fin(2, "dropped"), e.fout(0, "dx"), rows, Tk,
                              scale, rate);
    else
      cpu::softmaxDropout(e.fin(0, "scores"), e.fout(0, "dropped"),
                          e.fout(1, "probs"), rows, Tq, Tk, scale,
                          I.has("causal") && I.getInt("causal") != 0, rate,
                          uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::Attention:
  case Opcode::AttentionGrad: {
    const bool grad = I.op == Opcode::AttentionGrad;
    e.numIns(grad ? 6 : 3);
    e.numOuts(grad ? 3 : 2);
    const Buffer &qb = e.in(grad ? 1 : 0);
    if (qb.shape.size() != 4)
      e.fail("q '" + qb.name + "' must be [B,H,T,D], got " + shapeStr(qb.shape));
    const int64_t BH = qb.shape[0] * qb.shape[1], T = qb.shape[2],
                  D = qb.shape[3];
    for (size_t k = grad ? 0 : 1; k < I.inputs.size(); ++k)
      e.count(e.in(k), k == 5 ? BH * T : BH * T * D, k == 5 ? "lse" : "input");
    for (size_t k = 0; k < I.outputs.size(); ++k)
      e.count(e.out(k), k == 1 && !grad ? BH * T : BH * T * D, "output");
    const float scale = float(I.getFloat("scale"));
    const bool causal = I.getInt("causal") != 0;
    const double rate = I.getFloat("rate");
    if (!(rate >= 0.0 && rate < 1.0))
      e.fail("rate must be in [0, 1), got " + std::to_string(rate));
    const uint32_t stream = uint32_t(I.getInt("stream"));
    if (grad)
      cpu::attentionGrad(e.fin(0, "dout"), e.fin(1, "q"), e.fin(2, "k"),
                         e.fin(3, "v"), e.fin(4, "out"), e.fin(5, "lse"),
                         e.fout(0, "dq"), e.fout(1, "dk"), e.fout(2, "dv"), BH,
                         T, D, scale, causal, rate, stream, rng.seed,
                         rng.offset);
    else
      cpu::attention(e.fin(0, "q"), e.fin(1, "k"), e.fin(2, "v"),
                     e.fout(0, "out"), e.fout(1, "lse"), BH, T, D, scale,
                     causal, rate, stream, rng.seed, rng.offset);
    return;
  }
  case Opcode::SoftmaxGrad: {
    e.numIns(2);
    e.numOuts(1);
    const Buffer &y = e.in(1);
    const int64_t Tk = e.lastDim(y, "y");
    e.count(e.in(0), y.numElements(), "dy");
    e.count(e.out(0), y.numElements(), "dx");
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const float *dy = e.fin(0, "dy"), *py = e.fin(1, "y");
    cpu::softmaxGrad(dy, py, e.fout(0, "dx"), Tk ? y.numElements() / Tk : 0,
                     Tk, scale);
    return;
  }
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad: {
    const bool grad = I.op == Opcode::CrossEntropyGrad;
    e.numIns(grad ? 3 : 2);
    e.numOuts(1);
    const size_t li = grad ? 1 : 0;
    const Buffer &lg = e.in(li);
    const int64_t V = e.lastDim(lg, "logits");
    const int64_t rows = V ? lg.numElements() / V : 0;
    e.count(e.in(li + 1), rows, "labels");
    const int64_t ignore =
        I.has("ignore_index") ? I.getInt("ignore_index") : -100;
    const float *logits = e.fin(li, "logits");
    const int32_t *labels = e.iin(li + 1, "labels");
    if (grad) {
      const float dloss = e.scalarIn(0, "dloss");
      e.count(e.out(0), lg.numElements(), "dlogits");
      cpu::crossEntropyGrad(dloss, logits, labels, e.fout(0, "dlogits"), rows,
                            V, ignore);
    } else {
      e.count(e.out(0), 1, "loss");
      float *o = e.fout(0, "loss");
      o[0] = cpu::crossEntropy(logits, labels, rows, V, ignore);
    }
    return;
  }
  case Opcode::MlmMask: {
    e.numIns(1);
    e.numOuts(2);
    const int64_t n = e.in(0).numElements();
    e.count(e.out(0), n, "inputs");
    e.count(e.out(1), n, "labels");
    const int64_t vocab = I.getInt("vocab_size");
    if (vocab <= 0)
      e.fail("vocab_size must be positive, got " + std::to_string(vocab));
    const int32_t *ids = e.iin(0, "ids");
    int32_t *inputs = e.iout(0, "inputs"), *labels = e.iout(1, "labels");
    if (ids == inputs || ids == labels || inputs == labels)
      e.fail("outputs must not alias the input or each other");
    cpu::mlmMask(ids, inputs, labels, n, I.getFloat("mask_prob"),
                 int32_t(I.getInt("mask_token_id")), vocab,
                 uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  }
  case Opcode::Copy: {
    e.numIns(1);
    e.numOuts(1);
    const Buffer &i = e.in(0), &o = e.out(0);
    if (i.dtype != o.dtype)
      e.fail("dtypes differ: " + std::string(dtypeName(i.dtype)) + " -> " +
             dtypeName(o.dtype));
    e.count(o, i.numElements(), "output");
    cpu::copyBytes(S.data(e.outId(0)), S.data(e.inId(0)), i.bytes());
    return;
  }
  case Opcode::GlobalNorm: {
    e.numOuts(1);
    e.count(e.out(0), 1, "output");
    double total = 0.0;
    for (size_t k = 0; k < I.inputs.size(); ++k)
      total += cpu::sumSquares(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = float(std::sqrt(total));
    return;
  }
  case Opcode::ClipCoefficient: {
    e.numIns(1);
    e.numOuts(1);
    e.count(e.out(0), 1, "output");
    float norm = e.scalarIn(0, "norm");
    e.fout(0, "output")[0] = cpu::clipCoefficient(norm, I.getFloat("max_norm"));
    return;
  }
  case Opcode::LrSchedule: {
    e.numIns(1);
    e.numOuts(1);
    e.count(e.out(0), 1, "output");
    const int64_t step = e.stepIn(0);
    cpu::LrScheduleParams p;
    p.kind = I.has("kind") ? I.getString("kind") : "constant";
    auto optF = [&](const char *n, double &v) {
      if (I.has(n))
        v = I.getFloat(n);
    };
    optF("lr", p.lr);
    optF("warmup_min_lr", p.warmupMinLr);
    optF("warmup_max_lr", p.warmupMaxLr);
    optF("warmup_min_ratio", p.warmupMinRatio);
    optF("cos_min_ratio", p.cosMinRatio);
    if (I.has("warmup_num_steps"))
      p.warmupNumSteps = I.getInt("warmup_num_steps");
    if (I.has("warmup_type"))
      p.warmupType = I.getString("warmup_type");
    if (p.kind == "constant")
      p.lr = I.getFloat("lr");
    if (p.kind == "WarmupDecayLR" || p.kind == "WarmupCosineLR")
      p.totalNumSteps = I.getInt("total_num_steps");
    if (p.kind == "WarmupCosineLR")
      p.lr = I.getFloat("lr");
    e.fout(0, "output")[0] = float(cpu::lrSchedule(p, step));
    return;
  }
  case Opcode::Adam:
  case Opcode::Lamb: {
    e.numIns(7, 8);
    e.numOuts(3);
    const int64_t n = e.in(0).numElements();
    for (size_t k = 1; k < 4; ++k)
      e.count(e.in(k), n, k == 1 ? "grad" : "state");
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *m = e.inPlace(2, 1, "exp_avg");
    float *v = e.inPlace(3, 2, "exp_avg_sq");
    if (I.inputs.size() == 8 && e.scalarIn(7, "skip") != 0.0f)
      return; // fp16 overflow: param and state pass through
    const float lr = e.scalarIn(4, "lr");
    const int64_t step = e.stepIn(5);
    const float gscale = e.scalarIn(6, "gscale");
    if (step < 1)
      e.fail("step counter must be >= 1, got " + std::to_string(step));
    if (I.op == Opcode::Adam) {
      cpu::AdamParams hp{I.getFloat("beta1"),        I.getFloat("beta2"),
                         I.getFloat("eps"),          I.getFloat("weight_decay"),
                         I.getInt("adamw") != 0,
                         I.getInt("bias_correction") != 0};
      cpu::adam(p, g, m, v, n, lr, step, gscale, hp);
    } else {
      cpu::LambParams hp{I.getFloat("beta1"),        I.getFloat("beta2"),
                         I.getFloat("eps"),          I.getFloat("weight_decay"),
                         I.getFloat("max_coeff"),    I.getFloat("min_coeff"),
                         I.getInt("bias_correction") != 0};
      cpu::lamb(p, g, m, v, n, lr, step, gscale, hp);
    }
    return;
  }
  case Opcode::Sgd: {
    e.numIns(6, 7);
    e.numOuts(2);
    const int64_t n = e.in(0).numElements();
    e.count(e.in(1), n, "grad");
    e.count(e.in(2), n, "momentum_buffer");
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *buf = e.inPlace(2, 1, "momentum_buffer");
    if (I.inputs.size() == 7 && e.scalarIn(6, "skip") != 0.0f)
      return; // fp16 overflow: param and state pass through
    const float lr = e.scalarIn(3, "lr");
    const int64_t step = e.stepIn(4);
    const float gscale = e.scalarIn(5, "gscale");
    if (step < 1)
      e.fail("step counter must be >= 1, got " + std::to_string(step));
    cpu::SgdParams hp{I.getFloat("momentum"), I.getFloat("dampening"),
                      I.getFloat("weight_decay"), I.getInt("nesterov") != 0};
    cpu::sgd(p, g, buf, n, lr, step, gscale, hp);
    return;
  }
  case Opcode::RoundToHalf: {
    e.numIns(1);
    e.numOuts(1);
    const std::string format = I.getString("format");
    if (format != "f16" && format != "bf16")
      e.fail("format must be \"f16\" or \"bf16\", got \"" + format + "\"");
    const int64_t n = e.in(0).numElements();
    e.count(e.out(0), n, "output");
    cpu::roundToHalf(e.fin(0, "input"), e.fout(0, "output"), n,
                     format == "bf16");
    return;
  }
  case Opcode::CheckFinite: {
    e.numOuts(1);
    e.count(e.out(0), 1, "output");
    bool overflow = false;
    for (size_t k = 0; k < I.inputs.size() && !overflow; ++k)
      overflow = cpu::hasNonFinite(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = overflow ? 1.0f : 0.0f;
    return;
  }
  case Opcode::LossScale: {
    e.numIns(1);
    e.numOuts(1);
    e.count(e.in(0), 3, "state");
    e.count(e.out(0), 1, "output");
    const float scale =
        cpu::currentLossScale(e.fin(0, "state"), I.getFloat("initial_scale"));
    e.fout(0, "output")[0] = float(double(scale) * I.getFloat("multiplier"));
    return;
  }
  case Opcode::UnscaleClip: {
    e.numIns(2);
    e.numOuts(2);
    e.count(e.out(0), 1, "grad_scale");
    e.count(e.out(1), 1, "norm");
    float gscale, norm;
    cpu::unscaleClip(e.scalarIn(0, "scaled_norm"), e.scalarIn(1, "scale"),
                     I.getFloat("max_norm"), gscale, norm);
    e.fout(0, "grad_scale")[0] = gscale;
    e.fout(1, "norm")[0] = norm;
    return;
  }
  case Opcode::UpdateLossScale: {
    e.numIns(2);
    e.numOuts(1);
    e.count(e.in(0), 3, "state");
    e.count(e.out(0), 3, "new_state");
    cpu::LossScalerParams p;
    p.dynamic = I.getInt("dynamic") != 0;
    p.initialScale = I.getFloat("initial_scale");
    p.scaleWindow = I.getInt("scale_window");
    p.hysteresis = I.getInt("hysteresis");
    p.minScale = I.getFloat("min_scale");
    p.consecutiveHysteresis = I.getInt("consecutive_hysteresis") != 0;
    if (p.scaleWindow < 1 || p.hysteresis < 1)
      e.fail("scale_window and hysteresis must be >= 1");
    const bool overflow = e.scalarIn(1, "overflow") != 0.0f;
    float next[3];
    if (!cpu::updateLossScale(e.fin(0, "state"), next, overflow, p))
      e.fail("gradient overflow at the minimum loss scale " +
             std::to_string(p.minScale) +
             ": current loss scale already at minimum - cannot decrease "
             "scale anymore (DeepSpeed stops here too; lower "
             "fp16.min_loss_scale)");
    std::copy(next, next + 3, e.fout(0, "new_state"));
    return;
  }
  case Opcode::AllReduce: {
    e.numIns(1);
    e.numOuts(1);
    const std::string opName = I.has("op") ? I.getString("op") : "sum";
    if (opName != "sum" && opName != "mean")
      e.fail("op must be \"sum\" or \"mean\", got \"" + opName + "\"");
    float *o = e.inPlace(0, 0, "tensor");
    comm.allReduce(o, e.out(0).numElements(), opName == "mean");
    return;
  }
  }
  throw Error("unknown opcode " + std::to_string(int(I.op)));
}

} // namespace

std::unique_ptr<Backend> createCpuBackend(Communicator &comm) {
  return std::make_unique<CpuBackend>(comm);
}

} // namespace dsc::rt
