//===- OpcodeProfile.cpp - Time per opcode, printed at the end ------------===//

#include "dsc/Runtime/OpcodeProfile.h"
#include "dsc/Program/InstrCheck.h"
#include "dsc/Support/Environment.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace dsc::rt {

bool profileRequested() { return envFlag("DSC_PROFILE", false); }

void OpcodeProfile::add(Opcode op, double seconds) {
  auto &[total, calls] = entries[op];
  total += seconds;
  ++calls;
}

namespace {

std::string shapeText(const Buffer &b) {
  std::string s = "[";
  for (size_t i = 0; i < b.shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(b.shape[i]);
  return s + "]:" + dtypeName(b.dtype);
}

/// "Linear 8192x2304x768 bf16,bf16->bf16" for a GEMM (M x N x K, then
/// xbatch), else the opcode and its largest operand's and result's shapes.
std::string describeWork(const Program &P, const Instr &I,
                         const InstrDims &d) {
  std::string s = opcodeName(I.op);
  auto dtype = [&](int id) { return dtypeName(P.buffers[size_t(id)].dtype); };
  if (opInfo(I.op).route == OpRoute::Gemm) {
    s += " " + std::to_string(d.M) + "x" + std::to_string(d.N) + "x" +
         std::to_string(d.K);
    if (d.batch > 1)
      s += " x" + std::to_string(d.batch);
    s += std::string(" ") + dtype(I.inputs[0]) + "," + dtype(I.inputs[1]) +
         "->" + dtype(I.outputs[0]);
    return s;
  }
  // The largest operand and result name the shape (not a scalar seed).
  auto largest = [&](const std::vector<int> &ids) {
    const Buffer *best = nullptr;
    for (int id : ids)
      if (!best || P.buffers[size_t(id)].numElements() > best->numElements())
        best = &P.buffers[size_t(id)];
    return best;
  };
  if (const Buffer *in = largest(I.inputs))
    s += " " + shapeText(*in);
  if (const Buffer *out = largest(I.outputs))
    s += " -> " + shapeText(*out);
  return s;
}

/// The arithmetic of one instruction: 2 M N K per GEMM (batch included;
/// the experts' grouped GEMMs meet each of their M rows with one expert's
/// K x N matrix), the fused attention's four (forward) or ten (backward)
/// B H T^2 D halved when causal, 0 for the rest (memory-bound: their bytes
/// tell).
double instrFlops(const Instr &I, const InstrDims &d) {
  if (opInfo(I.op).route == OpRoute::Gemm || I.op == Opcode::GroupedLinear ||
      I.op == Opcode::GroupedLinearGradWeight)
    return 2.0 * double(d.batch) * double(d.M) * double(d.N) * double(d.K);
  if (I.op == Opcode::Attention || I.op == Opcode::AttentionGrad) {
    const double scores = double(d.BH) * double(d.T) * double(d.T) *
                          (I.getInt("causal") ? 0.5 : 1.0);
    return (I.op == Opcode::Attention ? 4.0 : 10.0) * scores * double(d.D);
  }
  return 0.0;
}

} // namespace

void OpcodeProfile::addWork(const Program &P,
                            const std::vector<const Instr *> &instrs,
                            double seconds) {
  if (instrs.empty())
    return;
  add(instrs[0]->op, seconds);
  std::string name;
  double flops = 0, bytes = 0;
  for (const Instr *I : instrs) {
    const InstrDims d = checkInstr(P, *I);
    if (name.empty())
      name = describeWork(P, *I, d);
    flops += instrFlops(*I, d);
    for (const std::vector<int> *ids : {&I->inputs, &I->outputs})
      for (int id : *ids)
        bytes += double(P.buffers[size_t(id)].bytes());
  }
  if (instrs.size() > 1)
    name += " (+" + std::to_string(instrs.size() - 1) + " more)";
  Work &w = work[name];
  w.seconds += seconds;
  w.flops += flops;
  w.bytes += bytes;
  ++w.calls;
}

OpcodeProfile::~OpcodeProfile() {
  if (entries.empty())
    return;
  std::vector<std::pair<double, Opcode>> order;
  double all = 0;
  for (auto &[op, entry] : entries) {
    order.push_back({entry.first, op});
    all += entry.first;
  }
  std::sort(order.rbegin(), order.rend());
  std::fprintf(stderr, "dsc %s profile: %.3f s in %zu opcodes\n",
               backend.c_str(), all, order.size());
  for (auto &[seconds, op] : order)
    std::fprintf(stderr, "  %-24s %9.4f s %5.1f%% %8lld calls\n",
                 opcodeName(op), seconds, 100 * seconds / all,
                 (long long)entries[op].second);
  if (work.empty())
    return;
  // The work items that took the most time, with the rate they achieved.
  std::vector<std::pair<double, const std::string *>> items;
  for (auto &[name, w] : work)
    items.push_back({w.seconds, &name});
  std::sort(items.rbegin(), items.rend());
  const size_t shown = std::min<size_t>(items.size(), 30);
  std::fprintf(stderr,
               "dsc %s profile: the %zu slowest of %zu work items (GEMMs: "
               "TFLOP/s; others: GB/s of operands read and results "
               "written once)\n",
               backend.c_str(), shown, items.size());
  for (size_t i = 0; i < shown; ++i) {
    const Work &w = work[*items[i].second];
    const double s = std::max(w.seconds, 1e-12);
    char rate[48];
    if (w.flops > 0)
      std::snprintf(rate, sizeof rate, "%8.2f TFLOP/s", w.flops / s / 1e12);
    else
      std::snprintf(rate, sizeof rate, "%8.1f GB/s", w.bytes / s / 1e9);
    std::fprintf(stderr, "  %9.4f s %5.1f%% %6lld calls %s  %s\n", w.seconds,
                 100 * w.seconds / all, (long long)w.calls, rate,
                 items[i].second->c_str());
  }
}

} // namespace dsc::rt
