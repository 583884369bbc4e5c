//===- CompressionEmit.cpp - CUDA launchers of the compression family -----===//
//
// onebit_compress (three kernels: error and sums of squares per chunk, the
// scale, signs and new error per byte), onebit_decode and
// onebit_decode_mean: emitCompression instantiates the templates of
// Compression.cuh. The all-to-all and all-gathers between them are NCCL
// steps of the emitter (CudaEmitter.cpp).
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::CompressionOpcode;

/// Elements per block of the sum of squares.
constexpr int64_t kChunk = 16384;

void emitCompress(KernelSpec &s, const rt::InstrDims &d) {
  const bool skip = s.I.inputs.size() == 3;
  const std::string x = s.in(0, "x"), error = s.in(1, "error");
  const std::string skipArg = skip ? s.in(2, "skip") : "nullptr";
  if (skip)
    s.requireType(s.inType(2), Storage::F32, "skip");
  const std::string signs = s.out(0, "signs"), scale = s.out(1, "scale"),
                    y = s.out(2, "new_error");
  const int64_t P = d.cols, chunks = ceilDiv(P, kChunk);
  s.scratch(chunks * 8);
  const std::string part = "static_cast<double *>(dsc_scratch)";
  std::vector<std::string> skipList;
  if (skip)
    skipList.push_back(skipArg);
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), skipList.begin(), skipList.end());
    return args;
  };
  s.kernel(chunks, kBlock, with({x, error, y, "dsc_scratch"}),
           call("onebitErrorSum", {n(d.n), n(P), n(kChunk),
                                   std::to_string(kBlock), b(skip)},
                {x, error, skipArg, y, part}));
  s.kernel(1, kBlock, with({"dsc_scratch", scale}),
           call("onebitScale", {n(chunks), n(P), std::to_string(kBlock),
                                b(skip)},
                {part, skipArg, scale}));
  elementwise(s, P / 8, with({scale, y, signs}),
              call("onebitPack", {n(P), b(skip)},
                   {scale, skipArg, y, signs}));
}

void emitDecode(KernelSpec &s, const rt::InstrDims &d) {
  const std::string signs = s.in(0, "signs"), scales = s.in(1, "scales"),
                    out = s.out(0, "out");
  if (s.I.op == Opcode::OnebitDecode) {
    elementwise(s, d.rows * d.cols, {signs, scales, out},
                call("onebitDecode", {n(d.rows), n(d.cols)},
                     {signs, scales, out}));
    return;
  }
  elementwise(s, d.cols, {signs, scales, out},
              call("onebitDecodeMean", {n(d.rows), n(d.cols)},
                   {signs, scales, out}));
}

void emitInt8(KernelSpec &s, const rt::InstrDims &d) {
  if (s.I.op == Opcode::QuantizeInt8) {
    const std::string x = s.in(0, "x"), codes = s.out(0, "codes"),
                      scales = s.out(1, "scales");
    elementwise(s, d.rows, {x, codes, scales},
                call("quantizeInt8", {n(d.rows), n(d.cols), s.T(x)},
                     {x, codes, scales}));
    return;
  }
  const std::string codes = s.in(0, "codes"), scales = s.in(1, "scales"),
                    out = s.out(0, "out");
  elementwise(s, d.n, {codes, scales, out},
              call("dequantizeInt8", {n(d.n), n(d.cols), s.T(out)},
                   {codes, scales, out}));
}

void emitQuantizeInt4(KernelSpec &s, const rt::InstrDims &d) {
  const std::string x = s.in(0, "x"), codes = s.out(0, "codes"),
                    scales = s.out(1, "scales");
  elementwise(s, d.rows, {x, codes, scales},
              call("quantizeInt4", {n(d.rows), n(d.cols), s.T(x)},
                   {x, codes, scales}));
}

void emitDequantizeReduceInt4(KernelSpec &s, const rt::InstrDims &d) {
  const std::string codes = s.in(0, "codes"), scales = s.in(1, "scales"),
                    out = s.out(0, "out");
  elementwise(s, d.n, {codes, scales, out},
              call("dequantizeReduceInt4",
                   {n(d.n), n(d.rows), n(d.cols),
                    b(d.reduce == rt::ReduceOp::Mean), s.T(out)},
                   {codes, scales, out}));
}

} // namespace

void emitCompression(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<CompressionOpcode>(s.I.op)) {
  case CompressionOpcode::QuantizeInt8:
  case CompressionOpcode::DequantizeInt8:
    return emitInt8(s, d);
  case CompressionOpcode::QuantizeInt4:
    return emitQuantizeInt4(s, d);
  case CompressionOpcode::DequantizeReduceInt4:
    return emitDequantizeReduceInt4(s, d);
  case CompressionOpcode::OnebitCompress:
    return emitCompress(s, d);
  case CompressionOpcode::OnebitDecode:
  case CompressionOpcode::OnebitDecodeMean:
    return emitDecode(s, d);
  }
  s.fail("internal: not a compression opcode");
}

} // namespace dsc::cuda::detail
