//===- HostSteps.cpp - ZeRO-Offload's host side of the CUDA backend -------===//

#include "HostSteps.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace dsc::rt {

PinnedHostArenas::~PinnedHostArenas() {
  // Best effort: the storage may be gone (the driver then only forgets).
  for (void *base : pinned)
    cudaHostUnregister(base);
}

size_t PinnedHostArenas::pin(const Program &program, Storage &storage) {
  const size_t bytes = storage.hostArenaBytes();
  if (bytes == 0)
    return 0;
  // The arena's base: any host-arena buffer's address less its offset.
  char *base = nullptr;
  for (size_t id = 0; id < program.buffers.size() && !base; ++id) {
    const Buffer &b = program.buffers[id];
    if (b.host && !b.nvme && b.offset >= 0)
      base = static_cast<char *>(storage.data(int(id))) - b.offset;
  }
  if (!base || std::count(pinned.begin(), pinned.end(), base))
    return 0;
  cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterDefault);
  if (e == cudaErrorHostMemoryAlreadyRegistered) {
    cudaGetLastError();
    return 0;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error("CUDA: cannot page-lock the " + std::to_string(bytes >> 20) +
                " MiB host arena of ZeRO-Offload (" + cudaGetErrorString(e) +
                "); the copies between the memories need it: check the "
                "locked-memory limit (ulimit -l) and free host memory");
  }
  pinned.push_back(base);
  return bytes;
}

void *HostInstructions::task(size_t instr) {
  tasks.push_back({this, instr});
  return &tasks.back();
}

void HostInstructions::node(void *task) {
  const Task &t = *static_cast<const Task *>(task);
  t.owner->run(t.instr);
}

void HostInstructions::begin(const Program &p, const Function &f, Storage &s,
                             const RngContext &r, int ranksOnNode) {
  localRanks = ranksOnNode;
  program = &p;
  fn = &f;
  storage = &s;
  rng = r;
  failed = false;
  failure.clear();
}

void HostInstructions::run(size_t instr) {
  if (failed)
    return;
  std::string why;
  try {
    runOnHost(*program, *storage, fn->body[instr], rng, localRanks);
    return;
  } catch (const std::exception &e) {
    why = e.what();
  } catch (...) {
    why = "unknown exception";
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (!failed)
    failure = "@" + fn->name + " #" + std::to_string(instr) + " " +
              opcodeName(fn->body[instr].op) + " (on the host): " + why;
  failed = true;
}

void HostInstructions::rethrow() {
  if (!failed)
    return;
  failed = false;
  throw Error(failure);
}

} // namespace dsc::rt
