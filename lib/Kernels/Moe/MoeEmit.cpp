//===- MoeEmit.cpp - CUDA launchers of the mixture-of-experts family ------===//
//
// emitMoe instantiates the templates of Moe.cuh for the router, the row
// layout and moves, the grouped GEMMs and the load-balancing loss. Index
// operands (expert choices, slots, counts) must be i32; a bad index sets a
// status code (KernelSpec::status) instead of trapping.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

namespace dsc::cuda::detail {

using rt::Opcode;
using rt::asFamily;
using rt::MoeOpcode;

namespace {

/// One block of E threads (one per expert), as moeRoute and moeLoad need.
int expertBlock(const KernelSpec &s, int64_t E) {
  if (E > 1024)
    s.fail("more than 1024 experts (" + std::to_string(E) +
           ") do not fit one block");
  return int(std::max<int64_t>(32, ceilDiv(E, 32) * 32));
}

/// Whether any route of the program has a capacity (token dropping): then
/// dispatch zeroes the padding rows no kept choice takes, as the CPU does.
bool dropsTokens(const rt::Program &P) {
  for (const auto &[name, fn] : P.functions)
    for (const rt::Instr &I : fn.body)
      if (I.op == Opcode::MoeRoute && I.getInt("capacity") > 0)
        return true;
  return false;
}

void emitRowMoves(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.rows, K = d.topK, C = d.cols;
  const std::string code = s.status("expert row slot out of range [0," +
                                    std::to_string(N * K) + ")");
  if (s.I.op == Opcode::MoeSlotDot) {
    s.requireType(s.inType(2), Storage::I32, "slots");
    const std::string x = s.in(0, "x"), rows = s.in(1, "rows"),
                      slots = s.in(2, "slots"), dw = s.out(0, "dw");
    elementwise(s, N * K, {x, rows, slots, dw},
                call("moeSlotDot",
                     {s.T(x), s.T(rows), s.T(dw), n(N), n(K), n(C)},
                     {x, rows, slots, dw, code}));
    return;
  }
  const bool weighted = s.I.inputs.size() == 3;
  s.requireType(s.inType(1), Storage::I32, "slots");
  const std::string src = s.in(0, "src"), slots = s.in(1, "slots"),
                    dst = s.out(0, "dst");
  const std::string w = weighted ? s.in(2, "w") : "(const float *)nullptr";
  const std::string wT = weighted ? s.T(w) : "float";
  std::vector<std::string> args = {src, slots, dst};
  if (weighted)
    args.push_back(w);
  const bool dispatch = s.I.op == Opcode::MoeDispatch;
  if (dispatch && dropsTokens(s.program))
    elementwise(s, N * K * C, {dst},
                call("moeZeroRows", {s.T(dst), n(N * K), n(C)}, {dst}));
  elementwise(s, dispatch ? N * K * C : N * C, args,
              call(dispatch ? "moeDispatch" : "moeCombine",
                   {s.T(src), wT, s.T(dst), n(N), n(K), n(C), b(weighted)},
                   {src, slots, w, dst, code}));
}

void emitGroupedLinear(KernelSpec &s, const rt::InstrDims &d) {
  s.requireType(s.inType(2), Storage::I32, "counts");
  const bool fwd = s.I.op == Opcode::GroupedLinear;
  const std::string x = s.in(0, "x"), other = s.in(1, fwd ? "w" : "dy"),
                    counts = s.in(2, "counts"),
                    out = s.out(0, fwd ? "y" : "dw");
  const std::string code =
      s.status("the experts' row counts do not add up to the " +
               std::to_string(d.M) + " rows");
  elementwise(s, fwd ? d.M * d.N : d.experts * d.K * d.N,
              {x, other, counts, out},
              call(fwd ? "groupedLinear" : "groupedLinearGradWeight",
                   {s.T(x), s.T(other), s.T(out), n(d.M), n(d.K), n(d.N),
                    n(d.experts), b(d.transW)},
                   {x, other, counts, out, code}));
}

void emitBalanceLoss(KernelSpec &s, const rt::InstrDims &d) {
  const bool grad = s.I.op == Opcode::MoeBalanceLossGrad;
  std::vector<int> ids(s.I.inputs.begin() + (grad ? 1 : 0), s.I.inputs.end());
  const std::string loads = s.table("loads", ids, false);
  const std::string dloss = grad ? s.in(0, "dloss") : "(const float *)nullptr";
  if (grad)
    s.requireType(s.inType(0), Storage::F32, "dloss");
  s.requireType(s.outType(0), Storage::F32, grad ? "dload" : "loss");
  const std::string out = s.out(0, "out");
  std::vector<std::string> args = {loads, out};
  if (grad)
    args.push_back(dloss);
  elementwise(s, grad ? d.experts : 1, args,
              call("moeBalanceLoss",
                   {std::to_string(ids.size()), n(d.experts), b(grad)},
                   {loads, dloss, out, dbl(s.I.getFloat("scale"))}));
}

} // namespace

void emitMoe(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.rows, E = d.experts, K = d.topK;
  switch (asFamily<MoeOpcode>(s.I.op)) {
  case MoeOpcode::MoeTopk: {
    const std::string logits = s.in(0, "logits"), w = s.out(0, "w"),
                      experts = s.out(1, "experts");
    s.requireType(s.outType(1), Storage::I32, "experts");
    elementwise(s, N, {logits, w, experts},
                call("moeTopk",
                     {s.T(logits), s.T(w), n(N), n(E), n(K),
                      b(s.I.getInt("normalize") != 0)},
                     {logits, w, experts}));
    return;
  }
  case MoeOpcode::MoeTopkGrad: {
    s.requireType(s.inType(2), Storage::I32, "experts");
    const std::string dw = s.in(0, "dw"), w = s.in(1, "w"),
                      experts = s.in(2, "experts"), out = s.out(0, "dlogits");
    const bool withLogits = s.I.inputs.size() == 4;
    const std::string logits =
        withLogits ? s.in(3, "logits") : "(const float *)nullptr";
    std::vector<std::string> args = {dw, w, experts, out};
    if (withLogits)
      args.push_back(logits);
    elementwise(s, N, args,
                call("moeTopkGrad",
                     {s.T(dw), s.T(w), s.T(out),
                      withLogits ? s.T(logits) : "float", n(N), n(E), n(K),
                      b(withLogits)},
                     {dw, w, experts, logits, out}));
    return;
  }
  case MoeOpcode::MoeRoute: {
    s.requireType(s.inType(0), Storage::I32, "experts");
    const std::string experts = s.in(0, "experts"), slots = s.out(0, "slots"),
                      counts = s.out(1, "counts");
    const std::string code =
        s.status("expert choice out of range [0," + std::to_string(E) + ")");
    s.kernel(
        1, expertBlock(s, E), {experts, slots, counts},
        call("moeRoute",
             {n(N * K), n(E), n(K), n(std::max<int64_t>(
                                        s.I.getInt("capacity"), 0))},
             {experts, slots, counts, code}));
    return;
  }
  case MoeOpcode::MoeDispatch:
  case MoeOpcode::MoeCombine:
  case MoeOpcode::MoeSlotDot:
    return emitRowMoves(s, d);
  case MoeOpcode::GroupedLinear:
  case MoeOpcode::GroupedLinearGradWeight:
    return emitGroupedLinear(s, d);
  case MoeOpcode::MoeLoad: {
    s.requireType(s.inType(1), Storage::I32, "experts");
    s.requireType(s.outType(0), Storage::F32, "load");
    const std::string logits = s.in(0, "logits"), experts = s.in(1, "experts"),
                      load = s.out(0, "load");
    s.kernel(1, expertBlock(s, E), {logits, experts, load},
             call("moeLoad", {s.T(logits), n(N), n(E), n(K)},
                  {logits, experts, load}));
    return;
  }
  case MoeOpcode::MoeLoadGrad: {
    s.requireType(s.inType(0), Storage::F32, "dload");
    const std::string dload = s.in(0, "dload"), logits = s.in(1, "logits"),
                      out = s.out(0, "dlogits");
    elementwise(s, N * E, {dload, logits, out},
                call("moeLoadGrad", {s.T(logits), s.T(out), n(N), n(E)},
                     {dload, logits, out}));
    return;
  }
  case MoeOpcode::MoeBalanceLoss:
  case MoeOpcode::MoeBalanceLossGrad:
    return emitBalanceLoss(s, d);
  }
}

} // namespace dsc::cuda::detail
