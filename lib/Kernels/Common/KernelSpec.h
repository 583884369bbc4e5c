//===- KernelSpec.h - One instruction's CUDA launcher ------------*- C++ -*-===//
//
// KernelSpec builds the launcher of one instruction (or of one group of
// optimizer instructions): its C-ABI parameters, the `extern "C"
// __global__` wrappers that instantiate the templates of the device library
// (lib/Kernels/*/*.cuh), and the launches. The kernel-name prefix is the
// placeholder `$K` and status codes are `$S<i>` until the driver has
// deduplicated the launcher.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_COMMON_KERNELSPEC_H
#define DSC_LIB_KERNELS_COMMON_KERNELSPEC_H

#include "dsc/Codegen/CudaEmitter.h"

#include <map>
#include <string>
#include <vector>

namespace dsc::cuda::detail {

std::string flt(double v);      ///< exact float literal (hex), e.g. 0x1p-1f
std::string dbl(double v);      ///< exact double literal (hex)
std::string num(int64_t v);     ///< integer literal, LL when it needs 64 bits
int64_t ceilDiv(int64_t a, int64_t b);
int vecFor(int64_t n);          ///< 4 when n is a multiple of 4, else 1
int64_t gridFor(int64_t items, int block); ///< grid-stride loops: capped

/// Threads per row, cached vectors per thread and the launch shape of a row
/// kernel over rows of C elements (Common.cuh "Row kernels").
struct RowConfig {
  int threads = 32, items = 1, vec = 1, block = 128;
  int64_t grid = 1;
};

class KernelSpec {
public:
  KernelSpec(const rt::Program &program, const rt::Instr &instr);

  [[noreturn]] void fail(const std::string &message) const;

  // Operand access (after rt::checkInstr has checked the operands) and
  // storage-type checks.
  const rt::Buffer &inBuf(size_t k) const;
  const rt::Buffer &outBuf(size_t k) const;
  int inId(size_t k) const;
  int outId(size_t k) const;
  Storage inType(size_t k) const { return inBuf(k).dtype; }
  Storage outType(size_t k) const { return outBuf(k).dtype; }
  void requireType(Storage s, Storage want, const std::string &name) const;

  // Parameters. Each returns the parameter's name.
  std::string in(size_t k, const std::string &name);
  std::string out(size_t k, const std::string &name);
  std::string buffer(int id, bool output, const std::string &name);
  std::string table(const std::string &name, const std::vector<int> &ids,
                    bool output);
  /// Stream/seed/offset parameters; returns the dsc::Rng expression.
  std::string rng();
  std::string scratch(int64_t bytes);
  /// The rank's coordinate along `axis` (an int parameter the runtime
  /// fills); returns its name, "group_rank".
  std::string groupRank(rt::MeshAxis axis);
  /// The element C type of a buffer parameter.
  std::string T(const std::string &name) const;
  /// A status code placeholder for `reason` (the driver prefixes the
  /// launcher name).
  std::string status(const std::string &reason);
  /// A constant array at namespace scope, `$K_<name>`; returns its name.
  std::string constArray(const std::string &name,
                         const std::vector<int64_t> &values);
  /// An int array in global memory at namespace scope, `$K_<name>`, for
  /// tables too large for the 64 KiB of constant memory; returns its name.
  std::string deviceArray(const std::string &name,
                          const std::vector<int32_t> &values);

  /// Adds a kernel taking the named parameters and running `body`.
  void kernel(int64_t grid, int block, const std::vector<std::string> &args,
              const std::string &body);

  RowConfig rowConfig(int64_t rows, int64_t C) const;

  const rt::Program &program;
  const rt::Instr &I;
  std::string opName;
  /// A fused attention's kernels (tiles or registers): chooseAttention's.
  AttentionKernel attention = AttentionKernel::Tiles;

  // The launcher being built.
  Launcher launcher;
  std::vector<Step::Arg> args;
  std::string device; ///< globals and kernels
  std::vector<std::string> reasons;

private:
  int paramIndex(const std::string &name) const;
  /// `<declaration> $K_<name>[] = {values}` at namespace scope (an empty
  /// array gets one 0); returns the array's name.
  std::string namespaceArray(const std::string &declaration,
                             const std::string &name,
                             const std::vector<int64_t> &values);
  std::map<std::string, Storage> types;
};

} // namespace dsc::cuda::detail

#endif // DSC_LIB_KERNELS_COMMON_KERNELSPEC_H
