//===- Runtime.h - Executing a Program on a backend ------------*- C++ -*-===//
//
// The runtime half of dsc: storage for every buffer of a Program, the
// communicator, data loading, safetensors I/O and a Backend that runs one
// Function of the Program. Links no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_RUNTIME_H
#define DSC_RUNTIME_RUNTIME_H

#include "dsc/Runtime/Program.h"

#include <memory>

namespace dsc::rt {

/// Collectives between data-parallel ranks. Every reduction in a Program goes
/// through this interface; nothing in the runtime assumes a single rank.
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// In-place sum (or mean when `average`) of `n` floats across all ranks.
  virtual void allReduce(float *data, int64_t n, bool average) = 0;
  virtual void barrier() = 0;
};

/// The communicator of a job with one process.
std::unique_ptr<Communicator> createSingleRankCommunicator();

/// Host memory for every buffer of a Program, 64-byte aligned. A program
/// with a memory plan (Program::arenaBytes >= 0) gets one zeroed arena and
/// each buffer lives at arena + Buffer::offset; otherwise every buffer is
/// allocated on its own.
class Storage {
public:
  explicit Storage(const Program &program);
  void *data(int buffer) {
    if (arena)
      noteUse(buffer);
    return ptrs[buffer];
  }
  float *f32(int buffer) { return static_cast<float *>(data(buffer)); }
  int32_t *i32(int buffer) { return static_cast<int32_t *>(data(buffer)); }
  int64_t *i64(int buffer) { return static_cast<int64_t *>(data(buffer)); }
  size_t totalBytes() const { return total; }
  /// Planned programs: the arena's size (Program::arenaBytes); else 0.
  size_t arenaBytes() const { return arenaSize; }
  /// The measured peak of the arena: the highest end (address - arena base
  /// + bytes) of any buffer handed out since construction, i.e. of every
  /// operand of every instruction the backend executed. 0 without a plan.
  size_t arenaHighWater() const { return highWater; }

private:
  void noteUse(int buffer);
  std::vector<std::unique_ptr<char[], void (*)(char *)>> owned;
  std::vector<void *> ptrs;
  std::vector<size_t> sizes;
  char *arena = nullptr;
  size_t arenaSize = 0, highWater = 0;
  size_t total = 0;
};

/// Per-call values that are not buffers: the Philox key and the offset that
/// makes every (step, micro-batch) draw a fresh stream.
struct RngContext {
  uint64_t seed = 0;
  uint64_t offset = 0; ///< step * grad_accum + micro_batch
};

/// Runs Functions of a Program. The CPU backend is always available; a CUDA
/// backend implements the same interface.
class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  virtual void run(const Program &program, const Function &fn,
                   Storage &storage, const RngContext &rng) = 0;
  /// A backend that keeps the buffers in its own memory (a GPU) copies them
  /// from Storage after the driver wrote them there (`upload`) and back
  /// before the driver reads them (`download`). The CPU backend computes in
  /// Storage itself: both are no-ops.
  virtual void upload(Storage &, const std::vector<int> &buffers) {
    (void)buffers;
  }
  virtual void download(Storage &, const std::vector<int> &buffers) {
    (void)buffers;
  }
};

/// OpenBLAS for GEMMs, OpenMP elsewhere.
std::unique_ptr<Backend> createCpuBackend(Communicator &comm);

/// Fills every Param buffer per its init rule from a seeded Philox stream
/// (normal via Box-Muller), zeroes every other persistent buffer.
void initializeParameters(const Program &program, Storage &storage,
                          uint64_t seed);

} // namespace dsc::rt

#endif // DSC_RUNTIME_RUNTIME_H
