//===- CommonEmit.h - CUDA emit logic of the kernel families ----*- C++ -*-===//
//
// Internal to the CUDA emitter: lib/Codegen/CudaEmitter.cpp and the
// <Family>Emit.cpp files of lib/Kernels include it. emit<Family> builds, in
// a KernelSpec (lib/Codegen/CudaEmitterImpl.h), the launcher of one
// instruction of its family whose operands rt::checkInstr passed (the
// emitter's switch over Opcode, emitKernel, picks the family, the family's
// own switch the op): it checks the storage types it needs, picks the
// launch shape and vector width, and instantiates the template of
// <Family>.cuh that mirrors the opcode's CPU kernel. Then the helpers every
// family's emit logic uses (CommonEmit.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_COMMON_COMMONEMIT_H
#define DSC_LIB_KERNELS_COMMON_COMMONEMIT_H

#include "Common/KernelSpec.h"

#include "dsc/Program/InstrCheck.h"
#include "dsc/Program/KernelOpcodes.h"

#include <string>
#include <vector>

namespace dsc::cuda::detail {

/// Emits the launcher of `s.I`, an instruction of the family with the sizes
/// `d` (<Family>/<Family>Emit.cpp).
void emitElementwise(KernelSpec &s, const rt::InstrDims &d);
void emitNorms(KernelSpec &s, const rt::InstrDims &d);
void emitAttention(KernelSpec &s, const rt::InstrDims &d);
/// Why cuDNN's fused attention cannot run the fused attention `s.I`
/// (Attention or AttentionGrad) under `options`, "" when it can; the same
/// for the register kernels.
std::string whyNotCudnn(const KernelSpec &s, const rt::InstrDims &d,
                        const EmitOptions &options);
std::string whyNotRegisters(const KernelSpec &s, const rt::InstrDims &d,
                            const EmitOptions &options);
/// The implementation of the fused attention `s.I`: fp32 on the tiles
/// kernels; else the forced one (s.fail when it cannot run it), or the
/// first that can of cuDNN, the register kernels and the tiles kernels.
/// `cudnnAgreed`: cuDNN can run both the forward and the gradient of this
/// attention (they must agree: cuDNN's statistics and dropout masks are its
/// own).
AttentionKernel chooseAttention(const KernelSpec &s, const rt::InstrDims &d,
                                const EmitOptions &options, bool cudnnAgreed);
/// The cuDNN problem of the fused attention `s.I`.
CudnnAttention cudnnAttentionOf(const KernelSpec &s, const rt::InstrDims &d);
void emitEmbeddingLoss(KernelSpec &s, const rt::InstrDims &d);
/// One phase of a vocabulary-parallel instruction (VocabParallelEmit.cpp):
/// vocab_embedding and its gradient have one (phase 0; the embedding's
/// group all-reduce of its output follows); the loss and its gradient
/// three: 0 the row maxima into the scratch (then the group's max), 1 the
/// sums of exponentials and, for the loss, the labels' logits (then the
/// group's sum of both), 2 the loss, or the gradient.
void emitVocabPhase(KernelSpec &s, const rt::InstrDims &d, int phase);
/// The scratch bytes of the loss's phases: mx, sum, target (a float per
/// row each) and the gradient's scale.
int64_t vocabScratchBytes(int64_t rows);
/// Launches an embedding gradient over `local` table rows: `fn`
/// (embeddingGrad or vocabEmbeddingGrad) with `targs` followed by the rows
/// per block and the block size, called with `args`, of which the
/// kernel's parameters are `params`; about 512 blocks, each reading every
/// token id once.
void emitEmbeddingGradRows(KernelSpec &s, int64_t local,
                           const std::string &fn,
                           std::vector<std::string> targs,
                           const std::vector<std::string> &params,
                           const std::vector<std::string> &args);
void emitGated(KernelSpec &s, const rt::InstrDims &d);
void emitRotary(KernelSpec &s, const rt::InstrDims &d);
void emitQuantized(KernelSpec &s, const rt::InstrDims &d);
void emitMoe(KernelSpec &s, const rt::InstrDims &d);
void emitCompression(KernelSpec &s, const rt::InstrDims &d);
/// The scalar and multi-tensor reductions of the step (global norm,
/// inf/NaN check, clip, schedule, loss scaler); the optimizers themselves
/// go through emitOptimizerGroup.
void emitOptimizers(KernelSpec &s, const rt::InstrDims &d);
/// Emits one multi-tensor launcher for a run of Adam, Lamb or Sgd
/// instructions with equal attributes and scalar inputs (spec is built on
/// the first instruction; OptimizersEmit.cpp).
void emitOptimizerGroup(KernelSpec &spec,
                        const std::vector<const rt::Instr *> &group);

/// Threads per block of the grid-stride and multi-tensor kernels.
constexpr int kBlock = 256;

/// `dsc::name<targs...>` and `dsc::name<targs...>(args...);`.
std::string tmpl(const std::string &name,
                 const std::vector<std::string> &targs);
std::string call(const std::string &fn, const std::vector<std::string> &targs,
                 const std::vector<std::string> &args);

/// Literals: `true`/`false`, an integer (num), an integer with LL.
std::string b(bool v);
std::string n(int64_t v);
std::string ll(int64_t v);

/// Elementwise launch: `items` work items of a grid-stride loop.
void elementwise(KernelSpec &s, int64_t items,
                 const std::vector<std::string> &args,
                 const std::string &body);

/// The THREADS, ITEMS, VEC template arguments of a row kernel.
std::string rowArgs(const RowConfig &c);

} // namespace dsc::cuda::detail

#endif // DSC_LIB_KERNELS_COMMON_COMMONEMIT_H
