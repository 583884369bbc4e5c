//===- AttentionEmit.cpp - CUDA launchers of the attention family ---------===//
//
// softmax, softmax_dropout and their gradients (row kernels) and the fused
// attention (FlashAttention-2) forward and backward: emitAttention and the
// emit logic of each op, which instantiates the matching templates of
// Attention.cuh.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonEmit.h"

#include <algorithm>

namespace dsc::cuda::detail {

namespace {

using rt::Opcode;
using rt::asFamily;
using rt::AttentionOpcode;

/// The key padding mask argument of a kernel ("(const int *)nullptr"
/// without one) and its template count: `perMaskRow` rows (or heads) per
/// row of the mask [B, Tk], 0 without one.
std::pair<std::string, int64_t> keyMaskArg(KernelSpec &s,
                                           const rt::InstrDims &d,
                                           int64_t perMaskRow) {
  if (d.keyMaskInput < 0)
    return {"(const int *)nullptr", 0};
  const size_t k = size_t(d.keyMaskInput);
  s.requireType(s.inType(k), Storage::I32, "key_mask");
  return {s.in(k, "key_mask"), perMaskRow};
}

void emitSoftmax(KernelSpec &s, const rt::InstrDims &d) {
  const Opcode op = s.I.op;
  const bool grad = op == Opcode::SoftmaxGrad || op == Opcode::SoftmaxDropoutGrad;
  const bool drop = op == Opcode::SoftmaxDropout || op == Opcode::SoftmaxDropoutGrad;
  // SoftmaxDropoutGrad reads the forward's mask off its `dropped` output
  // (third input), as the CPU backend does.
  const bool maskFromDropped = op == Opcode::SoftmaxDropoutGrad;
  const int64_t TK = d.cols, TQ = d.tq, rows = d.rows;
  const float scale = s.I.has("scale") ? float(s.I.getFloat("scale")) : 1.0f;
  const double rate = d.rate;
  const std::string keepScale = flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0);
  const RowConfig c = s.rowConfig(rows, TK);
  std::string rng = "dsc::Rng{0u, 0ull, 0ull}";
  if (grad) {
    const std::string dy = s.in(0, "dy"), y = s.in(1, "y");
    std::string dropped = "(const float *)nullptr", dropT = "float";
    std::vector<std::string> args = {dy, y};
    if (maskFromDropped) {
      dropped = s.in(2, "dropped");
      dropT = s.T(dropped);
      args.push_back(dropped);
    }
    const std::string dx = s.out(0, "dx");
    args.push_back(dx);
    const int mask = maskFromDropped ? 2 : 0;
    s.kernel(c.grid, c.block, args,
             call("softmaxGradRows",
                  {s.T(dy), s.T(y), dropT, s.T(dx), std::to_string(mask),
                   n(rows), n(TK), rowArgs(c)},
                  {dy, y, dropped, dx, flt(scale), flt(rate), keepScale,
                   rng}));
    return;
  }
  const bool causal = s.I.has("causal") && s.I.getInt("causal") != 0;
  // A block-sparse softmax (dsc.fusion.attention off) masks the keys
  // outside its layout; the fused attention is the fast path.
  const rt::BlockLayout &layout = s.I.getLayout("layout");
  std::string layoutArgs = "", layoutTemplate = "";
  if (!layout.empty()) {
    layoutArgs = ", " + s.deviceArray("rows", layout.rows) + ", " +
                 s.deviceArray("cols", layout.cols);
    layoutTemplate = ", " + n(layout.block) + ", " + n(layout.blocks) + ", " +
                     n(layout.heads);
  }
  const std::string xs = s.in(0, "x");
  std::string probs, dropped = "(float *)nullptr", dropT = "float";
  std::vector<std::string> args = {xs};
  const auto [keyMask, rowsPerMaskRow] = keyMaskArg(s, d, rows / std::max<int64_t>(d.B, 1));
  if (d.keyMaskInput >= 0)
    args.push_back(keyMask);
  if (drop) {
    dropped = s.out(0, "dropped");
    probs = s.out(1, "probs");
    dropT = s.T(dropped);
    args.insert(args.end(), {dropped, probs});
    rng = s.rng();
    args.insert(args.end(), {"stream", "seed", "offset"});
  } else {
    probs = s.out(0, "y");
    args.push_back(probs);
  }
  std::string body =
      call("softmaxRows",
           {s.T(xs), s.T(probs), dropT, b(causal), b(drop), n(rows), n(TQ),
            n(TK), rowArgs(c), n(rowsPerMaskRow) + layoutTemplate},
           {xs, keyMask, probs, dropped, flt(scale), flt(rate), keepScale,
            rng + layoutArgs});
  s.kernel(c.grid, c.block, args, body);
}

/// Shared memory of the fused attention kernels (Attention.cuh
/// attentionForward / attentionGradKV / attentionGradQ) at one tile size:
/// tiles of the compute type TC plus f32 scores and accumulators.
int64_t attentionSmem(bool grad, int64_t tile, int64_t D, int64_t tc) {
  if (!grad)
    return (2 * tile * D + tile * tile) * tc +
           (tile * tile + tile * D + 2 * tile) * 4;
  const int64_t kv = (4 * tile * D + 2 * tile * tile) * tc +
                     (2 * tile * tile + 2 * tile * D) * 4;
  const int64_t q = (4 * tile * D + tile * tile) * tc +
                    (2 * tile * tile + tile * D) * 4;
  return std::max(kv, q);
}

/// The tile of a block-sparse attention: the largest of 64, 32, 16 that
/// divides the layout's block and fits, else the block itself (FMA) if it
/// fits; 0 if nothing fits.
int64_t sparseTile(int64_t block, bool grad, int64_t D, int64_t tcBytes) {
  for (int64_t t : {64, 32, 16})
    if (block % t == 0 && attentionSmem(grad, t, D, tcBytes) <= 48 * 1024)
      return t;
  return block < 16 && attentionSmem(grad, block, D, 4) <= 48 * 1024 ? block
                                                                      : 0;
}


/// Attention and AttentionGrad (cpu::attention / attentionGrad): one block
/// of 4 warps per (batch*head, tile). The tiles are stored as the inputs'
/// half type when q, k, v (and dout) share it and D is a multiple of 16
/// (WMMA tensor cores), else as f32 (FMA); the tile is the largest of 64,
/// 32, 16 whose kernels fit the 48 KiB of static shared memory. With a
/// block layout the tile divides its block (sparseTile; the layout is
/// refined to the tile) and the layout's compressed rows (and, for the
/// backward's key tiles, columns) are arrays of the module. With
/// AttentionKernel::Registers (chooseAttention checked they apply) the
/// kernels are attention*Registers, on 64-token tiles.
void emitFusedAttention(KernelSpec &s, const rt::InstrDims &d) {
  const bool grad = s.I.op == Opcode::AttentionGrad;
  const size_t qi = grad ? 1 : 0;
  const int64_t BH = d.BH, T = d.T, D = d.D;
  const float scale = float(s.I.getFloat("scale"));
  const bool causal = s.I.getInt("causal") != 0;
  const double rate = d.rate;
  const std::string keepScale = flt(rate > 0.0 ? 1.0 / (1.0 - rate) : 1.0);

  Storage tc = s.inType(qi);
  for (size_t k = grad ? 0 : 1; k < qi + 3; ++k)
    if (s.inType(k) != tc)
      tc = Storage::F32;
  if (D % 16 != 0)
    tc = Storage::F32;
  const int64_t tcBytes = tc == Storage::F32 ? 4 : 2;
  const rt::BlockLayout &layout = s.I.getLayout("layout");
  // The register kernels' tiles are 64 queries and 64 keys; their shared
  // memory holds two 64 x D tiles (18 KiB at D = 64).
  const bool registers = s.attention == AttentionKernel::Registers;
  if (registers && tc == Storage::F32)
    s.fail("internal: the register kernels need 16-bit tiles");
  int64_t tile = 0;
  if (registers) {
    tile = 64;
  } else if (!layout.empty()) {
    tile = sparseTile(layout.block, grad, D, tcBytes);
    if (tile % 16 != 0)
      tc = Storage::F32;
  } else {
    for (int64_t t : {64, 32, 16})
      if (attentionSmem(grad, t, D, tcBytes) <= 48 * 1024) {
        tile = t;
        break;
      }
  }
  if (!tile)
    s.fail("head dim " + std::to_string(D) +
           (layout.empty() ? "" : " with blocks of " +
                                      std::to_string(layout.block)) +
           " needs more than 48 KiB of shared memory per block; set "
           "dsc.fusion.attention to false");
  const int warps = 4;
  const int64_t grid = BH * ceilDiv(T, tile);
  const std::string TC = storageCType(tc), rng = s.rng();
  const auto [keyMask, headsPerMaskRow] = keyMaskArg(s, d, d.H);
  const std::string shape = n(BH) + ", " + n(T) + ", " + n(D) + ", " +
                            n(tile) + ", " + b(causal) + ", " +
                            std::to_string(warps) + ", " + n(d.groups) +
                            ", " + n(layout.heads) + ", " +
                            n(headsPerMaskRow);
  // The kernels' buffer list: the mask is read when there is one.
  const auto withMask = [&](std::vector<std::string> bufs) {
    if (d.keyMaskInput >= 0)
      bufs.push_back(keyMask);
    return bufs;
  };
  // The layout at the tile's grain, by query tile (forward, dQ) and by key
  // tile (dK, dV); null pointers when dense.
  std::string rows = "(const int *)nullptr", cols = rows, keyRows = rows,
              keyCols = rows;
  if (!layout.empty()) {
    const rt::BlockLayout fine = layout.refined(layout.block / tile, causal);
    rows = s.deviceArray("rows", fine.rows);
    cols = s.deviceArray("cols", fine.cols);
    if (grad) {
      const rt::BlockLayout byKey = fine.transposed();
      keyRows = s.deviceArray("key_rows", byKey.rows);
      keyCols = s.deviceArray("key_cols", byKey.cols);
    }
  }
  const std::string tail = flt(scale) + ", " + flt(rate) + ", " + keepScale +
                           ", " + rng;
  const std::string registersShape =
      n(BH) + ", " + n(T) + ", " + n(D) + ", " + b(causal) + ", " +
      n(d.groups) + ", " + n(layout.heads) + ", " + n(headsPerMaskRow);
  if (!grad) {
    const std::string q = s.in(0, "q"), k = s.in(1, "k"), v = s.in(2, "v"),
                      out = s.out(0, "out"), lse = s.out(1, "lse");
    s.requireType(s.outType(1), Storage::F32, "lse");
    s.kernel(grid, warps * 32,
             withMask({q, k, v, out, lse, "stream", "seed", "offset"}),
             call(registers ? "attentionForwardRegisters" : "attentionForward",
                  {s.T(q), s.T(k), s.T(v), s.T(out), TC,
                   registers ? registersShape : shape},
                  {q, k, v, keyMask, out, lse, rows, cols, tail}));
    return;
  }
  const std::string g = s.in(0, "dout"), q = s.in(1, "q"), k = s.in(2, "k"),
                    v = s.in(3, "v"), o = s.in(4, "out"), lse = s.in(5, "lse"),
                    dq = s.out(0, "dq"), dk = s.out(1, "dk"),
                    dv = s.out(2, "dv");
  s.requireType(s.inType(5), Storage::F32, "lse");
  if (s.outType(1) != s.outType(2))
    s.fail("dk and dv must have one storage type");
  s.scratch(BH * T * 4);
  const std::string rowDot = "static_cast<float *>(dsc_scratch)";
  elementwise(s, BH * T, {g, o, "dsc_scratch"},
              call("attentionRowDot", {s.T(g), s.T(o), n(BH * T), n(D)},
                   {g, o, rowDot}));
  const std::string types =
      s.T(g) + ", " + s.T(q) + ", " + s.T(k) + ", " + s.T(v);
  // One block per key tile of each key/value head (it loops over the
  // query heads sharing it).
  s.kernel(
      grid / d.groups, warps * 32,
      withMask(
          {g, q, k, v, lse, "dsc_scratch", dk, dv, "stream", "seed", "offset"}),
      call(registers ? "attentionGradKVRegisters" : "attentionGradKV",
           {types, s.T(dk), TC, registers ? registersShape : shape},
           {g, q, k, v, lse, rowDot, keyMask, dk, dv, keyRows, keyCols, tail}));
  s.kernel(grid, warps * 32,
           withMask({g, q, k, v, lse, "dsc_scratch", dq, "stream", "seed",
                     "offset"}),
           call(registers ? "attentionGradQRegisters" : "attentionGradQ",
                {types, s.T(dq), TC, registers ? registersShape : shape},
                {g, q, k, v, lse, rowDot, keyMask, dq, rows, cols, tail}));
}

/// q, k, v (and, for the gradient, dout, out and the three gradients) of
/// one 16-bit type: that type; else F32.
Storage halfTileType(const KernelSpec &s) {
  const bool grad = s.I.op == Opcode::AttentionGrad;
  const Storage t = s.inType(grad ? 1 : 0);
  if (t == Storage::F32)
    return Storage::F32;
  std::vector<Storage> types = {s.inType(grad ? 2 : 1),
                                s.inType(grad ? 3 : 2)};
  if (grad)
    for (Storage u : {s.inType(0), s.inType(4), s.outType(0), s.outType(1),
                      s.outType(2)})
      types.push_back(u);
  else
    types.push_back(s.outType(0));
  for (Storage u : types)
    if (u != t)
      return Storage::F32;
  return t;
}

} // namespace

std::string whyNotCudnn(const KernelSpec &s, const rt::InstrDims &d,
                        const EmitOptions &options) {
  if (!options.cudnn)
    return "cuDNN is not loaded";
  if (options.sm < 80)
    return "sm_" + std::to_string(options.sm) +
           " (cuDNN's 16-bit fused attention needs sm_80)";
  if (halfTileType(s) == Storage::F32)
    return "its operands are not all of one 16-bit type";
  if (d.D % 8 != 0 || d.D > 128)
    return "head dim " + std::to_string(d.D) +
           " (cuDNN: a multiple of 8 up to 128)";
  if (!s.I.getLayout("layout").empty())
    return "it has a block-sparse layout";
  if (d.keyMaskInput >= 0)
    return "it has a key padding mask (any pattern; cuDNN masks only "
           "trailing keys)";
  if (d.rate > 0.0 && options.cpuDropoutMasks)
    return "its dropout must draw the CPU backend's masks here";
  return "";
}

std::string whyNotRegisters(const KernelSpec &s, const rt::InstrDims &d,
                            const EmitOptions &options) {
  const bool grad = s.I.op == Opcode::AttentionGrad;
  if (halfTileType(s) == Storage::F32)
    return "its operands are not all of one 16-bit type";
  if (d.D % 16 != 0 || d.D > (grad ? 64 : 128))
    return "head dim " + std::to_string(d.D) + " (a multiple of 16 up to " +
           (grad ? "64 for the backward)" : "128)");
  const rt::BlockLayout &layout = s.I.getLayout("layout");
  if (!layout.empty() && layout.block % 64 != 0)
    return "blocks of " + std::to_string(layout.block) +
           " tokens (a multiple of 64)";
  if (options.sm < 80)
    return "sm_" + std::to_string(options.sm) + " (needs sm_80)";
  return "";
}

AttentionKernel chooseAttention(const KernelSpec &s, const rt::InstrDims &d,
                                const EmitOptions &options, bool cudnnAgreed) {
  if (halfTileType(s) == Storage::F32)
    return AttentionKernel::Tiles;
  std::string noCudnn = whyNotCudnn(s, d, options);
  if (noCudnn.empty() && !cudnnAgreed)
    noCudnn = "cuDNN cannot run its forward or gradient";
  if (options.forceAttention) {
    std::string why;
    if (options.attention == AttentionKernel::Cudnn)
      why = noCudnn;
    else if (options.attention == AttentionKernel::Registers)
      why = whyNotRegisters(s, d, options);
    if (!why.empty())
      s.fail(std::string("the forced attention implementation '") +
             attentionKernelName(options.attention) +
             "' cannot run it: " + why);
    return options.attention;
  }
  if (noCudnn.empty())
    return AttentionKernel::Cudnn;
  if (whyNotRegisters(s, d, options).empty())
    return AttentionKernel::Registers;
  return AttentionKernel::Tiles;
}

CudnnAttention cudnnAttentionOf(const KernelSpec &s, const rt::InstrDims &d) {
  CudnnAttention a;
  a.backward = s.I.op == Opcode::AttentionGrad;
  a.batch = d.B;
  a.heads = d.H;
  a.kvHeads = d.H / d.groups;
  a.seq = d.T;
  a.headDim = d.D;
  a.type = halfTileType(s);
  a.causal = s.I.getInt("causal") != 0;
  a.scale = s.I.getFloat("scale");
  a.rate = d.rate;
  a.stream = uint64_t(s.I.getInt("stream"));
  return a;
}

void emitAttention(KernelSpec &s, const rt::InstrDims &d) {
  switch (asFamily<AttentionOpcode>(s.I.op)) {
  case AttentionOpcode::Softmax:
  case AttentionOpcode::SoftmaxDropout:
  case AttentionOpcode::SoftmaxGrad:
  case AttentionOpcode::SoftmaxDropoutGrad:
    return emitSoftmax(s, d);
  case AttentionOpcode::Attention:
  case AttentionOpcode::AttentionGrad:
    return emitFusedAttention(s, d);
  }
  s.fail("internal: not a softmax or attention opcode");
}

} // namespace dsc::cuda::detail
