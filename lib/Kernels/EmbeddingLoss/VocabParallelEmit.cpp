//===- VocabParallelEmit.cpp - CUDA launchers of the vocabulary-parallel ops ===//
//
// dsc.vocab_embedding, its gradient, dsc.vocab_cross_entropy and its
// gradient run as phases with the group's all-reduces between them (the
// emitter's steps, VocabPhase's comments): each phase is a launcher of
// VocabParallel.cuh's templates reading the rank's coordinate along the
// instruction's axis (KernelSpec::groupRank) and, for the loss, the row
// statistics in the launcher scratch (vocabScratchBytes).
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;

/// Rows per block and threads per row of the loss's row kernels, as
/// emitCrossEntropy picks them.
struct RowShape {
  int threads, block;
  int64_t grid;
};

RowShape rowShape(int64_t rows, int64_t cols) {
  RowShape r;
  r.threads = cols <= 2048 ? 32 : 256;
  r.block = r.threads == 32 ? 128 : r.threads;
  r.grid = std::max<int64_t>(1, r.threads == 32 ? ceilDiv(rows, 4) : rows);
  return r;
}

/// The scratch's float arrays: mx, sum, target (rows each), then k.
std::string scratchFloats(int64_t at) {
  return "(static_cast<float *>(dsc_scratch) + " + n(at) + ")";
}

void requireF32(KernelSpec &s, Storage t, const std::string &name) {
  s.requireType(t, Storage::F32, name);
}

} // namespace

int64_t vocabScratchBytes(int64_t rows) { return (3 * rows + 1) * 4; }

void emitVocabPhase(KernelSpec &s, const rt::InstrDims &d, int phase) {
  const int64_t V = s.I.getInt("vocab");
  const std::string rank = s.groupRank(d.axis);
  auto badId = [&] {
    return s.status("token id out of range [0," + std::to_string(V) + ")");
  };
  if (s.I.op == Opcode::VocabEmbedding) {
    const int64_t local = d.vocab, C = d.cols, rows = d.rows;
    requireF32(s, s.inType(0), "table");
    requireF32(s, s.outType(0), "output");
    s.requireType(s.inType(1), Storage::I32, "ids");
    const std::string table = s.in(0, "table"), ids = s.in(1, "ids"),
                      out = s.out(0, "out");
    const int vec = vecFor(C);
    elementwise(s, rows * (C / vec), {table, ids, out, rank},
                call("vocabEmbedding",
                     {s.T(table), s.T(out), n(rows), n(local), n(V), n(C),
                      std::to_string(vec)},
                     {table, ids, out, rank, badId()}));
    return;
  }
  if (s.I.op == Opcode::VocabEmbeddingGrad) {
    const int64_t local = d.vocab, C = d.cols, rows = d.rows;
    s.requireType(s.inType(0), Storage::I32, "ids");
    requireF32(s, s.inType(1), "dy");
    requireF32(s, s.outType(0), "dtable");
    const std::string ids = s.in(0, "ids"), dy = s.in(1, "dy"),
                      out = s.out(0, "dtable");
    emitEmbeddingGradRows(
        s, local, "vocabEmbeddingGrad",
        {s.T(dy), s.T(out), n(rows), n(local), n(V), n(C)},
        {ids, dy, out, rank}, {ids, dy, out, rank, badId()});
    return;
  }
  const bool grad = s.I.op == Opcode::VocabCrossEntropyGrad;
  const size_t li = grad ? 1 : 0;
  const int64_t local = d.cols, rows = d.rows;
  const int64_t ignore = s.I.getInt("ignore_index");
  requireF32(s, s.inType(li), "logits");
  s.requireType(s.inType(li + 1), Storage::I32, "labels");
  const std::string logits = s.in(li, "logits"),
                    labels = s.in(li + 1, "labels");
  s.scratch(vocabScratchBytes(rows));
  const std::string mx = scratchFloats(0), sum = scratchFloats(rows),
                    target = scratchFloats(2 * rows),
                    k = scratchFloats(3 * rows);
  const RowShape shape = rowShape(rows, local);
  const std::string threads = std::to_string(shape.threads);
  if (phase == 0) { // row maxima; then the group's max of mx
    s.kernel(shape.grid, shape.block, {logits, rank, "dsc_scratch"},
             call("vocabRowMax", {s.T(logits), n(rows), n(local), n(V), threads},
                  {logits, rank, mx}));
    return;
  }
  if (phase == 1) { // sums of exponentials (and the labels' logits); then
                    // the group's sum of sum (and target)
    s.kernel(shape.grid, shape.block, {logits, labels, rank, "dsc_scratch"},
             call("vocabRowSums",
                  {s.T(logits), n(rows), n(local), n(V), n(ignore), threads},
                  {logits, labels, rank, mx, sum, grad ? "nullptr" : target}));
    return;
  }
  const std::string badLabel = s.status(
      std::string(grad ? "vocab_cross_entropy_grad" : "vocab_cross_entropy") +
      ": a label is out of range [0," + std::to_string(V) +
      ") and not ignore_index " + std::to_string(ignore));
  if (!grad) {
    requireF32(s, s.outType(0), "loss");
    const std::string loss = s.out(0, "loss");
    s.kernel(1, kBlock, {labels, loss, "dsc_scratch"},
             call("vocabLoss", {s.T(loss), n(rows), n(V), n(ignore),
                                std::to_string(kBlock)},
                  {mx, sum, target, labels, loss, badLabel}));
    return;
  }
  requireF32(s, s.inType(0), "dloss");
  requireF32(s, s.outType(0), "dlogits");
  const std::string dl = s.in(0, "dloss"), dx = s.out(0, "dlogits");
  s.kernel(1, kBlock, {dl, labels, "dsc_scratch"},
           call("crossEntropyGradScale",
                {s.T(dl), n(rows), n(ignore), std::to_string(kBlock)},
                {dl, labels, k}));
  s.kernel(shape.grid, shape.block,
           {"dsc_scratch", logits, labels, rank, dx},
           call("vocabCrossEntropyGradRows",
                {s.T(logits), s.T(dx), n(rows), n(local), n(V), n(ignore),
                 threads},
                {k, logits, labels, rank, mx, sum, dx, badLabel}));
}

} // namespace dsc::cuda::detail
