//===- StepLanes.cpp - The queues a function's steps run on ---------------===//

#include "dsc/Codegen/StepLanes.h"

#include <algorithm>
#include <cstdint>

namespace dsc::cuda {

namespace {

/// Bytes [begin, end) of one memory: 0 the device arena, 1 the host arena,
/// 2 the swap file, 3 + id an unplanned buffer of its own.
struct Range {
  int64_t memory = 0;
  size_t begin = 0, end = 0;
};

bool overlap(const Range &a, const Range &b) {
  return a.memory == b.memory && a.begin < b.end && b.begin < a.end;
}

bool anyOverlap(const std::vector<Range> &a, const std::vector<Range> &b) {
  for (const Range &x : a)
    for (const Range &y : b)
      if (overlap(x, y))
        return true;
  return false;
}

struct Access {
  std::vector<Range> reads, writes;
};

} // namespace

const char *laneName(Lane lane) {
  switch (lane) {
  case Lane::Device:
    return "device";
  case Lane::ToHost:
    return "to-host";
  case Lane::Host:
    return "host";
  case Lane::Swap:
    return "swap";
  case Lane::ToDevice:
    return "to-device";
  case Lane::Comm:
    return "comm";
  }
  return "?";
}

Lane laneOf(const rt::Function &fn, const Step &step, bool overlapComm) {
  switch (step.kind) {
  case Step::Kind::Collective: {
    // Not the steps on the launcher scratch (the vocabulary-parallel
    // loss's statistics, which the device's kernels share).
    if (!overlapComm || step.scratchOffset >= 0)
      return Lane::Device;
    return rt::runsBesideCompute(fn.body[step.instrs.at(0)].op) ? Lane::Comm
                                                                 : Lane::Device;
  }
  case Step::Kind::HostCopy:
    return fn.body[step.instrs.at(0)].op == rt::Opcode::ToHost ? Lane::ToHost
                                                               : Lane::ToDevice;
  case Step::Kind::Host: {
    const rt::Opcode op = fn.body[step.instrs.at(0)].op;
    return op == rt::Opcode::SwapIn || op == rt::Opcode::SwapOut ? Lane::Swap
                                                                 : Lane::Host;
  }
  default:
    return Lane::Device;
  }
}

bool StepLanes::offDevice() const {
  return std::any_of(lane.begin(), lane.end(),
                     [](Lane l) { return l != Lane::Device; });
}

StepLanes scheduleLanes(const rt::Program &P, const rt::Function &fn,
                        const std::vector<Step> &steps) {
  StepLanes s;
  const bool overlapComm = P.metaInt("overlap_comm", 0, 0) != 0;
  for (const Step &step : steps)
    s.lane.push_back(laneOf(fn, step, overlapComm));
  s.waits.resize(steps.size());
  if (!s.offDevice()) // one lane: program order is the only order
    return s;

  const DeviceLayout layout = deviceLayout(P);
  auto range = [&](int id) {
    const rt::Buffer &b = P.buffers[size_t(id)];
    if (!b.host)
      return Range{0, layout.offsets[size_t(id)],
                   layout.offsets[size_t(id)] + b.bytes()};
    if (b.offset < 0)
      return Range{3 + id, 0, 1};
    return Range{b.nvme ? 2 : 1, size_t(b.offset), size_t(b.offset) + b.bytes()};
  };
  std::vector<Access> access(steps.size());
  for (size_t k = 0; k < steps.size(); ++k)
    for (size_t i : steps[k].instrs) {
      for (int id : fn.body[i].inputs)
        access[k].reads.push_back(range(id));
      for (int id : fn.body[i].outputs)
        access[k].writes.push_back(range(id));
    }
  auto conflict = [&](size_t a, size_t b) {
    return anyOverlap(access[a].writes, access[b].reads) ||
           anyOverlap(access[a].writes, access[b].writes) ||
           anyOverlap(access[a].reads, access[b].writes);
  };
  std::vector<std::vector<size_t>> byLane(kLaneCount);
  for (size_t k = 0; k < steps.size(); ++k) {
    for (int l = 0; l < kLaneCount; ++l) {
      if (Lane(l) == s.lane[k])
        continue;
      const std::vector<size_t> &earlier = byLane[size_t(l)];
      for (auto it = earlier.rbegin(); it != earlier.rend(); ++it)
        if (conflict(*it, k)) {
          s.waits[k].push_back(*it);
          break;
        }
    }
    std::sort(s.waits[k].begin(), s.waits[k].end());
    byLane[size_t(s.lane[k])].push_back(k);
  }
  return s;
}

} // namespace dsc::cuda
