//===- CheckCuda.h - The CUDA backend against the CPU backend --*- C++ -*-===//
#ifndef DSC_TOOLS_DSCRUN_CHECKCUDA_H
#define DSC_TOOLS_DSCRUN_CHECKCUDA_H

#include "dsc/Runtime/CudaBackend.h"
#include "dsc/Runtime/IO.h"
#include "dsc/Program/Program.h"
#include "dsc/Runtime/Runtime.h"

#include <iosfwd>

namespace dsc {

struct CudaCheckOptions {
  /// Largest allowed max|gpu - cpu| / max|cpu| of any buffer an instruction
  /// writes (integer buffers must be equal).
  double kernelTolerance = 1e-3;
  /// Largest allowed max|gpu - cpu| / max|cpu| of the loss and of each
  /// parameter's gradient after one whole micro-step.
  double gradientTolerance = 1e-3;
  /// Largest allowed |gpu - cpu| / |cpu| of a step's loss.
  double lossTolerance = 1e-3;
  int64_t steps = 20;
};

/// Kernel check: one @micro_step and one @apply_step of `unplanned` (a
/// program without a memory plan, so every buffer keeps its value),
/// instruction by instruction, each on the CPU's values of its operands
/// (rt::compareInstructionByInstruction): every buffer each instruction
/// writes is compared. Gradient check: one whole @micro_step of `planned`
/// on both, as each backend runs it (fusions across instructions
/// included), from the same weights and batch; the loss and every
/// parameter's gradient are compared (rt::compareGradients). Training
/// check: `options.steps` steps of `planned` on both; the losses are
/// compared. Prints a report; returns whether everything was within
/// tolerance.
bool checkCudaAgainstCpu(const rt::Program &unplanned,
                         const rt::Program &planned, const rt::TokenFile &data,
                         const CudaCheckOptions &options, std::ostream &os);

/// The CUDA backend's options of the checks (the default kernel cache).
rt::CudaOptions checkCudaOptions();

/// `check-cuda --compression` (CheckCompression.cpp): 1-bit Adam's compression-stage kernels
/// (ema_update, onebit_compress with and without a skipped step,
/// onebit_decode_mean, onebit_decode, frozen_adam, flat_resize) and 0/1
/// Adam's (local_adam, zero_one_unwind, zero_one_sync) on random
/// operands of awkward sizes, every buffer equal to the CPU backend's bit
/// for bit; 1-bit LAMB's (lamb_coeff_ema, momentum_scales, scale_by,
/// onebit_lamb_update), which reduce in another order, within 1e-6. The NCCL exchanges between them need several GPUs; this checks
/// every kernel of the stage on one. Prints a report; returns whether all
/// matched.
bool checkCompressionKernels(std::ostream &os);

/// `check-cuda --epilogues` (CheckEpilogues.cpp): one fp32 function whose
/// GEMMs take every cuBLASLt epilogue dsc fuses (bias + tanh GELU with its
/// aux output, DGELU_BGRAD, BGRADA with beta = 1 accumulation, BGRADB),
/// pre-activations over [-4, 4], run whole on the GPU with
/// DSC_CUDA_EPILOGUES=all and on the CPU; every output within 1e-5 of the
/// CPU's (GELU's erf form would be about 1e-4 off). Prints a report;
/// returns whether all matched.
bool checkEpilogues(std::ostream &os);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_CHECKCUDA_H
