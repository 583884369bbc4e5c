//===- LaneShuffle.cpp - Adversarial orders of the CUDA lanes -------------===//

#include "LaneShuffle.h"

#include "dsc/Codegen/StepLanes.h"

#include <cstdlib>
#include <random>

namespace dsc::rt {

std::optional<uint64_t> laneShuffleSeed() {
  const char *v = std::getenv("DSC_CPU_LANE_SHUFFLE");
  if (!v || !*v)
    return std::nullopt;
  char *end = nullptr;
  const unsigned long long seed = std::strtoull(v, &end, 10);
  if (*end != '\0')
    throw Error(std::string("DSC_CPU_LANE_SHUFFLE: '") + v +
                "' is not a seed (a non-negative integer)");
  return seed;
}

std::vector<size_t> shuffledLaneOrder(const Program &program,
                                      const Function &fn, uint64_t seed) {
  std::vector<cuda::Step> steps(fn.body.size());
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const Instr &I = fn.body[i];
    steps[i].kind =
        I.host ? cuda::Step::Kind::Host
        : I.op == Opcode::ToHost || I.op == Opcode::ToDevice
            ? cuda::Step::Kind::HostCopy
        : opInfo(I.op).kernels == KernelFamily::Collective
            ? cuda::Step::Kind::Collective
            : cuda::Step::Kind::Kernel;
    steps[i].instrs = {i};
  }
  const cuda::StepLanes lanes = cuda::scheduleLanes(program, fn, steps);
  if (!lanes.offDevice())
    return {};
  // Each lane's steps in program order; a lane's next step is ready when
  // every step it waits for has run.
  std::vector<std::vector<size_t>> queue(cuda::kLaneCount);
  for (size_t i = 0; i < steps.size(); ++i)
    queue[size_t(lanes.lane[i])].push_back(i);
  std::vector<size_t> next(cuda::kLaneCount, 0), order;
  std::vector<bool> done(steps.size(), false);
  std::mt19937_64 random(seed);
  while (order.size() < steps.size()) {
    std::vector<int> ready;
    for (int l = 0; l < cuda::kLaneCount; ++l) {
      if (next[size_t(l)] == queue[size_t(l)].size())
        continue;
      const size_t i = queue[size_t(l)][next[size_t(l)]];
      bool free = true;
      for (size_t w : lanes.waits[i])
        free = free && done[w];
      if (free)
        ready.push_back(l);
    }
    if (ready.empty())
      throw Error("DSC_CPU_LANE_SHUFFLE: @" + fn.name +
                  ": the lanes' waits form a cycle");
    const int l = ready[random() % ready.size()];
    const size_t i = queue[size_t(l)][next[size_t(l)]++];
    done[i] = true;
    order.push_back(i);
  }
  return order;
}

} // namespace dsc::rt
