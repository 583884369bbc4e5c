//===- TorchExtension.h - CUDA module -> PyTorch extension -----*- C++ -*-===//
//
// Wraps the C-ABI launchers of an emitted CUDA module (CudaEmitter.h) in a
// PyTorch C++ extension: one Python function per launcher that takes
// torch tensors, checks each against what the launcher was specialised for
// (CUDA device, dtype, shape, contiguity, alignment) and calls the launcher
// on the caller's current CUDA stream. The bindings use no ATen CUDA header
// (the stream comes from Python as an integer, the device is set through
// the CUDA runtime), so they also compile against a CPU-only torch. Plain
// C++ over rt::Program and the emitted Module (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_TORCHEXTENSION_H
#define DSC_CODEGEN_TORCHEXTENSION_H

#include "dsc/Codegen/CudaEmitter.h"

#include <string>
#include <vector>

namespace dsc::cuda {

/// The header name (EmitOptions::headerName) a module must be emitted with
/// to be wrapped: the extension ships the emitted files under these names.
inline constexpr const char *kTorchKernelsSource = "dsc_kernels.cu";
inline constexpr const char *kTorchKernelsHeader = "dsc_kernels.h";

struct ExtensionFile {
  std::string name; ///< relative to the extension directory
  std::string text;
};

/// The extension's files: the emitted dsc_kernels.cu / dsc_kernels.h;
/// dsc_extension.cu (includes dsc_kernels.cu and adds a reader of the
/// `dsc_status` device variable); binding.cpp (pybind11 functions over
/// torch::Tensor); dsc_ext.py (the Python API: load(), one function per
/// launcher, LAUNCHERS metadata, take_status()); setup.py; README.md.
/// `module` must have been emitted from `program` with headerName
/// kTorchKernelsHeader; throws rt::Error otherwise.
std::vector<ExtensionFile> torchExtensionFiles(const rt::Program &program,
                                               const Module &module);

} // namespace dsc::cuda

#endif // DSC_CODEGEN_TORCHEXTENSION_H
