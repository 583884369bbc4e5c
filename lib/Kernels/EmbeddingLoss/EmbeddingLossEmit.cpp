//===- EmbeddingLossEmit.cpp - CUDA launchers of embedding and loss -------===//
//
// embedding and embedding_grad, cross_entropy and its gradient, mlm_mask:
// emitEmbeddingLoss and the emit logic of each op, which instantiates the
// matching templates of EmbeddingLoss.cuh. A bad token id or label sets a
// status code (KernelSpec::status) instead of trapping.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::EmbeddingLossOpcode;

void emitEmbedding(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t V = d.vocab, C = d.cols, rows = d.rows;
  s.requireType(s.inType(1), Storage::I32, "ids");
  const std::string table = s.in(0, "table"), ids = s.in(1, "ids"),
                    out = s.out(0, "out");
  const int vec = vecFor(C);
  const std::string code =
      s.status("token id out of range [0," + std::to_string(V) + ")");
  elementwise(s, rows * (C / vec), {table, ids, out},
              call("embedding",
                   {s.T(table), s.T(out), n(rows), n(V), n(C),
                    std::to_string(vec)},
                   {table, ids, out, code}));
}

void emitEmbeddingGrad(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t V = d.vocab, C = d.cols, rows = d.rows;
  s.requireType(s.inType(0), Storage::I32, "ids");
  const std::string ids = s.in(0, "ids"), dy = s.in(1, "dy"),
                    out = s.out(0, "dtable");
  const std::string code =
      s.status("token id out of range [0," + std::to_string(V) + ")");
  emitEmbeddingGradRows(s, V, "embeddingGrad",
                        {s.T(dy), s.T(out), n(rows), n(V), n(C)},
                        {ids, dy, out}, {ids, dy, out, code});
}

void emitCrossEntropy(KernelSpec &s, const rt::InstrDims &d) {
  const bool both = s.I.op == Opcode::CrossEntropyWithGrad;
  const bool grad = both || s.I.op == Opcode::CrossEntropyGrad;
  const size_t li = grad ? 1 : 0;
  // Rows of V logits, the first `classes` of them the classes, read 16
  // bytes at a time where the rows allow: 8 elements of a 16-bit type
  // (a padded vocabulary's rows are multiples of 64), else 4.
  const int64_t V = d.cols, classes = d.vocab, rows = d.rows;
  const std::string vec = std::to_string(
      s.inType(li) != Storage::F32 && V % 8 == 0 ? 8 : vecFor(V));
  s.requireType(s.inType(li + 1), Storage::I32, "labels");
  const int64_t ignore =
      s.I.has("ignore_index") ? s.I.getInt("ignore_index") : -100;
  const int threads = V <= 2048 ? 32 : 256;
  const int block = threads == 32 ? 128 : threads;
  const int64_t grid = std::max<int64_t>(1, threads == 32 ? ceilDiv(rows, 4) : rows);
  const std::string code = s.status(
      std::string(both   ? "cross_entropy_with_grad"
                  : grad ? "cross_entropy_grad"
                         : "cross_entropy") +
      ": a label is out of range [0," + std::to_string(classes) +
      ") and not ignore_index " + std::to_string(ignore));
  if (grad) {
    // k = dloss / count, then each row's dlogits (fused: and its loss, in
    // place when the lowering gave dlogits the logits' buffer) in one pass,
    // then, fused, the mean loss.
    const std::string dl = s.in(0, "dloss"), logits = s.in(1, "logits"),
                      labels = s.in(2, "labels"),
                      loss = both ? s.out(0, "loss") : "",
                      dx = s.out(both ? 1 : 0, "dlogits");
    s.scratch(16 + (both ? std::max<int64_t>(rows, 1) * 8 : 0));
    const std::string k = "static_cast<float *>(dsc_scratch)",
                      part = "reinterpret_cast<double *>(static_cast<char "
                             "*>(dsc_scratch) + 16)";
    s.kernel(1, kBlock, {dl, labels, "dsc_scratch"},
             call("crossEntropyGradScale",
                  {s.T(dl), n(rows), n(ignore), std::to_string(kBlock)},
                  {dl, labels, k}));
    const std::vector<std::string> rowArgs =
        both ? std::vector<std::string>{k, logits, labels, part, dx, code}
             : std::vector<std::string>{k, logits, labels, dx, code};
    s.kernel(grid, block, {"dsc_scratch", logits, labels, dx},
             call(both ? "crossEntropyWithGradRows" : "crossEntropyGradRows",
                  {s.T(logits), s.T(dx), n(rows), n(V), n(classes), n(ignore),
                   std::to_string(threads), vec},
                  rowArgs));
    if (both)
      s.kernel(1, kBlock, {"dsc_scratch", labels, loss},
               call("crossEntropyFinish",
                    {s.T(loss), n(rows), n(ignore), std::to_string(kBlock)},
                    {part, labels, loss}));
    return;
  }
  const std::string logits = s.in(0, "logits"), labels = s.in(1, "labels"),
                    loss = s.out(0, "loss");
  s.scratch(std::max<int64_t>(rows, 1) * 8);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  s.kernel(grid, block, {logits, labels, "dsc_scratch"},
           call("crossEntropyRows",
                {s.T(logits), n(rows), n(V), n(classes), n(ignore),
                 std::to_string(threads), vec},
                {logits, labels, part, code}));
  s.kernel(1, kBlock, {"dsc_scratch", labels, loss},
           call("crossEntropyFinish",
                {s.T(loss), n(rows), n(ignore), std::to_string(kBlock)},
                {part, labels, loss}));
}

void emitMlmMask(KernelSpec &s, const rt::InstrDims &d) {
  const int64_t N = d.n, vocab = s.I.getInt("vocab_size");
  if (s.inId(0) == s.outId(0) || s.inId(0) == s.outId(1) ||
      s.outId(0) == s.outId(1))
    s.fail("outputs must not alias the input or each other");
  for (size_t k = 0; k < 2; ++k)
    s.requireType(s.outType(k), Storage::I32, k ? "labels" : "inputs");
  s.requireType(s.inType(0), Storage::I32, "ids");
  const std::string ids = s.in(0, "ids"), in = s.out(0, "inputs"),
                    lab = s.out(1, "labels");
  s.rng();
  elementwise(s, N, {ids, in, lab, "stream", "seed", "offset"},
              call("mlmMask", {n(N), n(s.I.getInt("pad_token_id"))},
                   {ids, in, lab, flt(s.I.getFloat("mask_prob")),
                    std::to_string(int32_t(s.I.getInt("mask_token_id"))),
                    std::to_string(uint32_t(vocab)) + "u", "stream", "seed",
                    "offset"}));
}

void emitPaddingMask(KernelSpec &s, const rt::InstrDims &d) {
  s.requireType(s.inType(0), Storage::I32, "ids");
  s.requireType(s.outType(0), Storage::I32, "mask");
  const std::string ids = s.in(0, "ids"), mask = s.out(0, "mask");
  elementwise(s, d.n, {ids, mask},
              call("paddingMask", {n(d.n), n(s.I.getInt("pad_token_id"))},
                   {ids, mask}));
}

} // namespace

void emitEmbeddingGradRows(KernelSpec &s, int64_t local,
                           const std::string &fn,
                           std::vector<std::string> targs,
                           const std::vector<std::string> &params,
                           const std::vector<std::string> &args) {
  // Every block reads all token ids: enough blocks to fill a GPU, few
  // enough that the ids are read a few hundred times, not once per column.
  const int64_t perBlock = std::max<int64_t>(1, (local + 511) / 512);
  const int64_t grid = std::max<int64_t>(1, (local + perBlock - 1) / perBlock);
  targs.push_back(n(perBlock));
  targs.push_back(std::to_string(kBlock));
  s.kernel(grid, kBlock, params, call(fn, targs, args));
}

void emitEmbeddingLoss(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<EmbeddingLossOpcode>(s.I.op)) {
  case EmbeddingLossOpcode::Embedding:
    return emitEmbedding(s, d);
  case EmbeddingLossOpcode::EmbeddingGrad:
    return emitEmbeddingGrad(s, d);
  case EmbeddingLossOpcode::CrossEntropy:
  case EmbeddingLossOpcode::CrossEntropyGrad:
  case EmbeddingLossOpcode::CrossEntropyWithGrad:
    return emitCrossEntropy(s, d);
  case EmbeddingLossOpcode::MlmMask:
    return emitMlmMask(s, d);
  case EmbeddingLossOpcode::PaddingMask:
    return emitPaddingMask(s, d);
  }
  s.fail("internal: not an embedding or loss opcode");
}

} // namespace dsc::cuda::detail
