//===- CompressedAllReduce.cpp - DeepSpeed's 1-bit all-reduce as IR -------===//

#include "CompressedAllReduce.h"

#include <numeric>

using namespace mlir;
using namespace mlir::dsc;

int64_t mlir::dsc::compressedSize(int64_t n, int64_t groupSize) {
  const int64_t divider = groupSize * 8 / std::gcd(groupSize, int64_t(8));
  const int64_t unit = groupSize * divider;
  return (n + unit - 1) / unit * unit;
}

CompressedAllReduce mlir::dsc::buildCompressedAllReduce(
    OpBuilder &b, Location loc, Value input, Value workerError,
    Value serverError, Value skip, int64_t groupSize) {
  MLIRContext *ctx = b.getContext();
  const int64_t p = cast<RankedTensorType>(workerError.getType())
                        .getNumElements(),
                g = groupSize, chunk = p / g;
  Type f32 = b.getF32Type();
  Type u8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
  auto vec = [](int64_t n, Type t) { return RankedTensorType::get({n}, t); };
  auto data = MeshAxisAttr::get(ctx, MeshAxis::data);

  auto worker = b.create<OnebitCompressOp>(
      loc, TypeRange{vec(p / 8, u8), vec(1, f32), workerError.getType()},
      input, workerError, skip);
  // Rank j receives chunk j of every worker's signs, and every scale.
  Value received = b.create<AllToAllOp>(loc, vec(p / 8, u8),
                                        worker.getSigns(), data);
  Value workerScales =
      b.create<AllGatherOp>(loc, vec(g, f32), worker.getScale(), data);
  Value mean = b.create<OnebitDecodeMeanOp>(loc, vec(chunk, f32), received,
                                            workerScales);
  auto server = b.create<OnebitCompressOp>(
      loc, TypeRange{vec(chunk / 8, u8), vec(1, f32), serverError.getType()},
      mean, serverError, skip);
  Value allSigns =
      b.create<AllGatherOp>(loc, vec(p / 8, u8), server.getSigns(), data);
  Value serverScales =
      b.create<AllGatherOp>(loc, vec(g, f32), server.getScale(), data);
  Value decoded =
      b.create<OnebitDecodeOp>(loc, vec(p, f32), allSigns, serverScales);
  Value result = b.create<FlatResizeOp>(loc, input.getType(), decoded);
  return {result, worker.getNewError(), server.getNewError()};
}
