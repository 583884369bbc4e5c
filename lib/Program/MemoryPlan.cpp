//===- MemoryPlan.cpp - Static arena planning of a step Program -----------===//
//
// Places every buffer of a lowered step in one arena (see MemoryPlan.h for
// the layout) and summarises the result as a memory report.
//
// Liveness. Instructions of a function run in order. A Temp buffer is live
// from the first instruction that names it (its producer) to the last one
// that names it (its last reader), both inclusive. An instruction that
// computes in place names the same buffer id as input and output, which
// simply extends that buffer's range. Because the ends are inclusive, an
// instruction's outputs never share memory with the inputs it reads last:
// kernels such as GEMMs cannot run in place, and the runtime has no per-
// opcode "may overwrite its input" fact yet. A Temp named by no instruction
// (the lowering makes none) gets a slot of its own above all the others.
// With overlap_comm, a collective that runs beside the compute
// (rt::runsBesideCompute) keeps its inputs live until the next such
// collective is issued: the transfer reads them after it is issued, and an
// instruction reusing their bytes would have to wait for it.
//
// Transient outputs. An Output buffer that one function writes and no
// other function names (@eval_step's logits, the gradient norm, a pipeline
// stage's sent activation) is read by the driver right after that function
// returns and never again, so it is packed with that function's Temps, live from its
// producer to the function's end, instead of holding persistent memory
// through every other function's run.
//
// Packing: greedy by size, best fit. The Temps of a function are sorted by
// size (largest first; ties by first use, then id) and placed one at a time:
// among the already placed Temps whose live ranges intersect its own, the
// gaps between their address ranges are scanned and the smallest gap that
// holds the buffer is taken, else the buffer goes on top of them. Every size
// is rounded up to 64 bytes so every offset stays aligned.
//
// A function of more than kMaxGreedyTemps Temps (a model of hundreds of
// layers) would spend most of the compile in that quadratic scan; it is
// placed in program order instead, as an allocator would (packInOrder:
// best fit from a free list whose freed blocks merge, O(n log n)), which on
// training steps lands as close to the lower bound below.
//
// The greedy placement is the "greedy by size" heuristic of TensorFlow
// Lite's arena planner.
// It is not optimal: placing intervals with sizes so as to minimise the
// arena (dynamic storage allocation) is NP-hard. The report therefore
// carries, per function, the most bytes that are live at one instruction,
// a lower bound no placement can beat. On the GPT-2-small step (README.md,
// Benchmark) the greedy arena meets that bound exactly; on the tiny test
// models it is within 5%.
//
//===----------------------------------------------------------------------===//

#include "dsc/Program/MemoryPlan.h"
#include "dsc/Program/PipelineSchedule.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

using dsc::rt::Buffer;
using dsc::rt::BufferRole;
using dsc::rt::Program;

namespace dsc {

namespace {

int64_t alignUp(int64_t n) {
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

int64_t bytesOf(const Buffer &b) { return int64_t(b.bytes()); }

/// A Temp buffer with its live range in one function.
struct Interval {
  int id;
  int first, last; ///< instruction indices, inclusive
  int64_t size;    ///< aligned bytes
  int64_t raw;     ///< bytes
  int64_t offset = -1; ///< relative to the temp region
};

/// Live ranges of the Temp buffers of one function, in first-use order; a
/// transient output (placedAsTemp but not a Temp) lives until the
/// function returns, for the driver to read.
std::vector<Interval> liveRanges(const Program &program,
                                 const rt::Function &fn,
                                 const std::vector<bool> &placedAsTemp) {
  std::map<int, size_t> index;
  std::vector<Interval> ranges;
  const int end = int(fn.body.size()) - 1;
  for (size_t i = 0; i < fn.body.size(); ++i) {
    const rt::Instr &instr = fn.body[i];
    auto touch = [&](int id) {
      if (id < 0 || size_t(id) >= program.buffers.size() ||
          !placedAsTemp[size_t(id)])
        return; // the backend reports bad ids; persistent buffers are fixed
      if (program.buffers[size_t(id)].role == BufferRole::Output) {
        auto [it, fresh] = index.try_emplace(id, ranges.size());
        if (fresh)
          ranges.push_back({id, int(i), end,
                            alignUp(bytesOf(program.buffers[size_t(id)])),
                            bytesOf(program.buffers[size_t(id)])});
        return;
      }
      auto [it, fresh] = index.try_emplace(id, ranges.size());
      if (fresh)
        ranges.push_back({id, int(i), int(i),
                          alignUp(bytesOf(program.buffers[size_t(id)])),
                          bytesOf(program.buffers[size_t(id)])});
      else
        ranges[it->second].last = int(i);
    };
    for (int id : instr.inputs)
      touch(id);
    for (int id : instr.outputs)
      touch(id);
  }
  // overlap_comm: a collective beside the compute reads its inputs after
  // it is issued, so they stay live until the next such collective is
  // issued (the end: none), and the compute fills the next bucket while
  // this one travels (DeepSpeed's double buffer). Were the bytes reused at
  // once, the next instruction to touch them would wait for the transfer.
  if (program.metaInt("overlap_comm", 0, 0) != 0) {
    int next = end;
    for (int i = end; i >= 0; --i) {
      const rt::Instr &instr = fn.body[size_t(i)];
      if (!rt::runsBesideCompute(instr.op))
        continue;
      for (int id : instr.inputs)
        if (auto it = index.find(id); it != index.end())
          ranges[it->second].last = std::max(ranges[it->second].last, next);
      next = i;
    }
  }
  return ranges;
}

/// Greedy-by-size best-fit placement; returns the extent (aligned).
int64_t pack(std::vector<Interval> &ranges) {
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Interval &x = ranges[a], &y = ranges[b];
    if (x.size != y.size)
      return x.size > y.size;
    if (x.first != y.first)
      return x.first < y.first;
    return x.id < y.id;
  });
  // Placed intervals ordered by address range, so the gaps between those
  // live at the same time are scanned without sorting them per buffer. The
  // scan visits every placed interval for every new one (quadratic in the
  // Temps), so it runs over a compact copy of what it reads: contiguous
  // memory, no indirection.
  struct Placed {
    int64_t offset, end;
    int first, last;
    bool operator<(const Placed &o) const {
      return std::make_pair(offset, end) < std::make_pair(o.offset, o.end);
    }
  };
  std::vector<Placed> placed;
  placed.reserve(ranges.size());
  int64_t extent = 0;
  for (size_t k : order) {
    Interval &cur = ranges[k];
    int64_t cursor = 0, best = -1, bestGap = 0;
    for (const Placed &other : placed) {
      if (other.first > cur.last || cur.first > other.last)
        continue;
      const int64_t gap = other.offset - cursor;
      if (gap >= cur.size && (best < 0 || gap < bestGap)) {
        best = cursor;
        bestGap = gap;
      }
      cursor = std::max(cursor, other.end);
    }
    cur.offset = best >= 0 ? best : cursor;
    extent = std::max(extent, cur.offset + cur.size);
    const Placed mine{cur.offset, cur.offset + cur.size, cur.first, cur.last};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), mine), mine);
  }
  return extent;
}

/// Placement in program order, as an allocator would: at each Temp's first
/// use, the smallest free block that holds it (else the top of the
/// region); after its last use its block is freed and merged with free
/// neighbours. O(n log n) in the Temps.
int64_t packInOrder(std::vector<Interval> &ranges) {
  // `ranges` is in first-use order (liveRanges); free them by last use.
  std::vector<size_t> byLast(ranges.size());
  for (size_t i = 0; i < byLast.size(); ++i)
    byLast[i] = i;
  std::stable_sort(byLast.begin(), byLast.end(), [&](size_t a, size_t b) {
    return ranges[a].last < ranges[b].last;
  });
  std::map<int64_t, int64_t> freeAt;           // offset -> size
  std::set<std::pair<int64_t, int64_t>> bySize; // (size, offset)
  int64_t top = 0, extent = 0;
  auto take = [&](std::map<int64_t, int64_t>::iterator it) {
    bySize.erase({it->second, it->first});
    freeAt.erase(it);
  };
  auto release = [&](int64_t offset, int64_t size) {
    if (size == 0) // an empty tensor holds no block
      return;
    if (auto next = freeAt.find(offset + size); next != freeAt.end()) {
      size += next->second;
      take(next);
    }
    if (auto it = freeAt.lower_bound(offset); it != freeAt.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        take(prev);
      }
    }
    if (offset + size == top) { // the top comes down instead
      top = offset;
      return;
    }
    freeAt[offset] = size;
    bySize.insert({size, offset});
  };
  size_t freed = 0;
  for (Interval &cur : ranges) {
    while (freed < byLast.size() && ranges[byLast[freed]].last < cur.first) {
      const Interval &gone = ranges[byLast[freed++]];
      release(gone.offset, gone.size);
    }
    if (cur.size == 0) { // an empty tensor takes no memory
      cur.offset = 0;
      continue;
    }
    auto fit = bySize.lower_bound({cur.size, std::numeric_limits<int64_t>::min()});
    if (fit != bySize.end()) {
      const auto [size, offset] = *fit;
      take(freeAt.find(offset));
      cur.offset = offset;
      if (size > cur.size) {
        freeAt[offset + cur.size] = size - cur.size;
        bySize.insert({size - cur.size, offset + cur.size});
      }
    } else {
      cur.offset = top;
      top += cur.size;
    }
    extent = std::max(extent, cur.offset + cur.size);
  }
  return extent;
}

/// Above this many Temps in one function (about 340 transformer layers)
/// the greedy placement's scan, quadratic in the Temps, would dominate the
/// compile: functions that large are placed in program order instead.
constexpr size_t kMaxGreedyTemps = 16384;

/// The most Temp bytes live at one instruction.
int64_t maxLive(const std::vector<Interval> &ranges, size_t numInstrs) {
  std::vector<int64_t> delta(numInstrs + 2, 0);
  for (const Interval &r : ranges) {
    delta[size_t(r.first)] += r.raw;
    delta[size_t(r.last) + 1] -= r.raw;
  }
  int64_t live = 0, most = 0;
  for (int64_t d : delta)
    most = std::max(most, live += d);
  return most;
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", double(bytes) / (1024.0 * 1024.0));
  return text;
}

/// Whether `b` is placed in the host arena (`host`) or the device arena:
/// NVMe-resident buffers are in neither (planNvme places them).
bool inArena(const Buffer &b, bool host) { return b.host == host && !b.nvme; }

/// ZeRO-Infinity's swap file: the NVMe-resident buffers one after another,
/// each at a multiple of kNvmeAlignment (whole pages, for direct I/O);
/// returns the file's size.
int64_t planNvme(const Program &program, std::vector<int64_t> &offsets) {
  int64_t cursor = 0;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (program.buffers[id].nvme) {
      offsets[id] = cursor;
      cursor += (bytesOf(program.buffers[id]) + kNvmeAlignment - 1) /
                kNvmeAlignment * kNvmeAlignment;
    }
  return cursor;
}

/// Temps, and the transient outputs, which are packed with them.
std::vector<bool> placedAsTemp(const Program &program) {
  std::vector<bool> temp = transientOutputs(program);
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (program.buffers[id].role == BufferRole::Temp)
      temp[id] = true;
  return temp;
}

} // namespace

std::vector<bool> transientOutputs(const Program &program) {
  const size_t n = program.buffers.size();
  std::vector<int> functions(n, 0); // functions naming the buffer
  std::vector<bool> written(n, false);
  for (const auto &[name, fn] : program.functions) {
    std::set<int> named;
    for (const rt::Instr &instr : fn.body) {
      for (int id : instr.inputs)
        if (id >= 0 && size_t(id) < n)
          named.insert(id);
      for (int id : instr.outputs)
        if (id >= 0 && size_t(id) < n) {
          named.insert(id);
          written[size_t(id)] = true;
        }
    }
    for (int id : named)
      ++functions[size_t(id)];
  }
  std::vector<bool> transient(n, false);
  for (size_t id = 0; id < n; ++id)
    transient[id] = program.buffers[id].role == BufferRole::Output &&
                    functions[id] == 1 && written[id];
  return transient;
}

namespace {

/// Plans the buffers of one memory (`host`: Buffer::host) into `arena`,
/// offsets relative to that memory's arena, as planMemory describes.
bool planArena(const Program &program, bool host, std::vector<int64_t> &offsets,
               ArenaPlan &arena, std::string &error) {
  std::vector<bool> temp = placedAsTemp(program);
  auto mine = [&](size_t id) { return inArena(program.buffers[id], host); };
  for (size_t id = 0; id < program.buffers.size(); ++id)
    temp[id] = temp[id] && mine(id);

  int64_t cursor = 0;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (mine(id) && !temp[id]) {
      offsets[id] = cursor;
      cursor += alignUp(bytesOf(program.buffers[id]));
    }
  arena.persistentBytes = cursor;

  std::vector<std::string> owner(program.buffers.size());
  int64_t tempExtent = 0;
  for (const auto &[name, fn] : program.functions) {
    std::vector<Interval> ranges = liveRanges(program, fn, temp);
    for (const Interval &r : ranges) {
      if (!owner[size_t(r.id)].empty()) {
        error = "temp buffer #" + std::to_string(r.id) + " ('" +
                program.buffers[size_t(r.id)].name + "') is used by both @" +
                owner[size_t(r.id)] + " and @" + name;
        return false;
      }
      owner[size_t(r.id)] = name;
    }
    FunctionMemory fm;
    fm.name = name;
    fm.numTemps = int(ranges.size());
    fm.liveBytes = maxLive(ranges, fn.body.size());
    if (ranges.size() > kMaxGreedyTemps)
      packInOrder(ranges);
    else
      pack(ranges);
    for (const Interval &r : ranges) {
      offsets[size_t(r.id)] = arena.persistentBytes + r.offset;
      fm.tempBytes = std::max(
          fm.tempBytes, r.offset + bytesOf(program.buffers[size_t(r.id)]));
    }
    tempExtent = std::max(tempExtent, fm.tempBytes);
    arena.functions.push_back(fm);
  }
  // Temps no instruction names: slots of their own above every function's.
  int64_t unnamed = arena.persistentBytes + alignUp(tempExtent);
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (mine(id) && offsets[id] < 0) {
      offsets[id] = unnamed;
      unnamed += alignUp(bytesOf(program.buffers[id]));
    }

  arena.arenaBytes = 0;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (mine(id))
      arena.arenaBytes = std::max(arena.arenaBytes,
                                  offsets[id] + bytesOf(program.buffers[id]));
  return true;
}

} // namespace

bool planMemory(const Program &program, MemoryPlan &plan, std::string &error) {
  plan = MemoryPlan();
  plan.offsets.assign(program.buffers.size(), -1);
  ArenaPlan device;
  if (!planArena(program, /*host=*/false, plan.offsets, device, error) ||
      !planArena(program, /*host=*/true, plan.offsets, plan.host, error))
    return false;
  plan.nvmeBytes = planNvme(program, plan.offsets);
  plan.persistentBytes = device.persistentBytes;
  plan.arenaBytes = device.arenaBytes;
  plan.functions = std::move(device.functions);

  // Cheap (n log n in the Temps of one function) and the last line of
  // defence against a planner bug corrupting a training run.
  Program planned = program;
  applyMemoryPlan(planned, plan);
  if (!verifyMemoryPlan(planned, error)) {
    error = "internal error in the memory planner: " + error;
    return false;
  }
  return true;
}

void applyMemoryPlan(Program &program, const MemoryPlan &plan) {
  for (size_t id = 0; id < program.buffers.size(); ++id)
    program.buffers[id].offset = plan.offsets[id];
  program.arenaBytes = plan.arenaBytes;
  program.hostArenaBytes = plan.host.arenaBytes;
  program.nvmeBytes = plan.nvmeBytes;
}

namespace {

/// verifyMemoryPlan's checks over the buffers of one memory (`host`).
bool verifyArena(const Program &program, bool host, std::string &error) {
  const int64_t arenaBytes = host ? program.hostArenaBytes : program.arenaBytes;
  const char *arenaName = host ? "host arena" : "arena";
  auto mine = [&](size_t id) { return inArena(program.buffers[id], host); };
  auto name = [&](int id) {
    return "buffer #" + std::to_string(id) + " '" +
           program.buffers[size_t(id)].name + "'";
  };
  std::vector<bool> temp = placedAsTemp(program);
  for (size_t id = 0; id < program.buffers.size(); ++id)
    temp[id] = temp[id] && mine(id);
  int64_t persistentEnd = 0, tempBegin = arenaBytes;
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    if (!mine(id))
      continue;
    if (b.offset < 0 || b.offset % kArenaAlignment != 0 ||
        b.offset + bytesOf(b) > arenaBytes) {
      error = name(int(id)) + " at offset " + std::to_string(b.offset) +
              " is misaligned or outside the " + arenaName;
      return false;
    }
    if (temp[id])
      tempBegin = std::min(tempBegin, b.offset);
  }
  // Persistent buffers: pairwise disjoint and below every Temp.
  std::vector<std::pair<int64_t, int>> persistent;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (mine(id) && !temp[id])
      persistent.push_back({program.buffers[id].offset, int(id)});
  std::sort(persistent.begin(), persistent.end());
  for (auto [offset, id] : persistent) {
    if (offset < persistentEnd) {
      error = name(id) + " overlaps the persistent buffer before it";
      return false;
    }
    persistentEnd = offset + bytesOf(program.buffers[size_t(id)]);
  }
  if (persistentEnd > tempBegin) {
    error = "a temp buffer overlaps the persistent region";
    return false;
  }
  // Temps: a sweep over each function's instructions keeps the live ones
  // ordered by address; if those are disjoint, a new one conflicts only
  // with its neighbours in that order.
  for (const auto &[fname, fn] : program.functions) {
    std::vector<Interval> ranges = liveRanges(program, fn, temp); // by first use
    auto lastUseLater = [](const Interval *a, const Interval *b) {
      return a->last > b->last;
    };
    std::vector<const Interval *> ending; // min-heap by last use
    std::set<std::pair<int64_t, int>> live; // (offset, id)
    for (const Interval &r : ranges) {
      while (!ending.empty() && ending.front()->last < r.first) {
        const Buffer &gone = program.buffers[size_t(ending.front()->id)];
        live.erase({gone.offset, ending.front()->id});
        std::pop_heap(ending.begin(), ending.end(), lastUseLater);
        ending.pop_back();
      }
      const Buffer &b = program.buffers[size_t(r.id)];
      auto clash = [&](std::set<std::pair<int64_t, int>>::iterator it) {
        const Buffer &o = program.buffers[size_t(it->second)];
        if (b.offset < o.offset + bytesOf(o) && o.offset < b.offset + bytesOf(b)) {
          error = "in @" + fname + ", " + name(it->second) + " and " +
                  name(r.id) + " are live at the same time but share memory";
          return true;
        }
        return false;
      };
      auto next = live.lower_bound({b.offset, r.id});
      if (next != live.end() && clash(next))
        return false;
      if (next != live.begin() && clash(std::prev(next)))
        return false;
      live.insert({b.offset, r.id});
      ending.push_back(&r);
      std::push_heap(ending.begin(), ending.end(), lastUseLater);
    }
  }
  return true;
}

} // namespace

bool verifyMemoryPlan(const Program &program, std::string &error) {
  if (program.arenaBytes < 0) {
    error = "the program has no memory plan";
    return false;
  }
  return verifyArena(program, /*host=*/false, error) &&
         verifyArena(program, /*host=*/true, error);
}

MemoryReport reportMemory(const Program &program, const MemoryPlan &plan) {
  MemoryReport r;
  r.peakBytes = plan.arenaBytes;
  int64_t persistentRaw = 0;
  const std::vector<bool> temp = placedAsTemp(program);
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const Buffer &b = program.buffers[id];
    int64_t bytes = bytesOf(b);
    if (b.nvme) { // the swap file, reported on its own
      if (b.role == BufferRole::Param) {
        r.nvmeParameters += bytes;
        r.parameterCount += b.numElements();
      } else {
        (rt::isMasterWeights(b) ? r.nvmeMasterWeights
                                : r.nvmeOptimizerState) += bytes;
      }
      continue;
    }
    if (b.host) { // the host arena, reported on its own
      if (b.role == BufferRole::Param) {
        r.hostParameters += bytes;
        r.parameterCount += b.numElements();
      } else if (b.role == BufferRole::OptState) {
        (rt::isMasterWeights(b) ? r.hostMasterWeights
                                : r.hostOptimizerState) += bytes;
      }
      continue;
    }
    if (temp[id]) // counted in the temp arena (workspace)
      continue;
    switch (b.role) {
    case BufferRole::Temp:
      continue;
    case BufferRole::Param:
      r.parameters += bytes;
      // A 4-bit weight's bytes hold rows * cols parameters (a ZeRO-3
      // shard its share of them).
      r.parameterCount +=
          b.fourBit ? b.fourBit->rows * b.fourBit->cols * b.numElements() /
                          b.fourBit->layout().bytes
                    : b.numElements();
      break;
    case BufferRole::GradAcc:
      r.gradients += bytes;
      break;
    case BufferRole::OptState:
      r.optimizerState += bytes;
      break;
    case BufferRole::Input:
    case BufferRole::Output:
      r.inputsOutputs += bytes;
      break;
    }
    persistentRaw += bytes;
  }
  r.persistentBytes = std::min(plan.persistentBytes, plan.arenaBytes);
  r.padding = r.persistentBytes - persistentRaw;
  r.tempBytes = plan.arenaBytes - r.persistentBytes;

  // Saved activations: forward-written Temps that a backward instruction of
  // the same function reads.
  for (const auto &[name, fn] : program.functions) {
    std::map<int, int> producerLayer; // Temp written by a forward instr
    std::vector<bool> counted(program.buffers.size(), false);
    for (const rt::Instr &instr : fn.body) {
      if (instr.backward) {
        for (int id : instr.inputs) {
          auto it = producerLayer.find(id);
          if (it == producerLayer.end() || counted[size_t(id)])
            continue;
          counted[size_t(id)] = true;
          int64_t bytes = bytesOf(program.buffers[size_t(id)]);
          r.activations += bytes;
          if (it->second < 0) {
            r.activationsOutsideLayers += bytes;
            continue;
          }
          if (r.layers.size() <= size_t(it->second))
            r.layers.resize(size_t(it->second) + 1, 0);
          r.layers[size_t(it->second)] += bytes;
        }
        continue;
      }
      for (int id : instr.outputs)
        if (id >= 0 && size_t(id) < program.buffers.size() &&
            program.buffers[size_t(id)].role == BufferRole::Temp)
          producerLayer.try_emplace(id, instr.layer);
    }
  }
  r.workspace = r.tempBytes - r.activations;
  r.functions = plan.functions;
  r.hostPeakBytes = plan.host.arenaBytes;
  r.nvmeBytes = plan.nvmeBytes;
  r.hostWorkspace = r.hostPeakBytes - r.hostParameters -
                    r.hostMasterWeights - r.hostOptimizerState;
  const rt::PipelineStash stash = rt::pipelineStashOf(program);
  if (stash.stage >= 0) {
    r.pipelineInFlight = rt::pipelinePeakInFlight(stash.shape, stash.stage);
    r.pipelineStashBytes = stash.peakBytes();
    r.pipelineChunks = stash.shape.chunks;
  }
  return r;
}

std::string formatMemoryTable(const MemoryReport &r) {
  std::string out;
  char line[160];
  auto row = [&](const std::string &label, int64_t bytes) {
    std::snprintf(line, sizeof line, "  %-28s %16lld %12s\n", label.c_str(),
                  (long long)bytes, mib(bytes).c_str());
    out += line;
  };
  out += "memory plan: one static arena, 64-byte aligned buffers\n";
  std::snprintf(line, sizeof line, "  %-28s %16s %12s\n", "category", "bytes",
                "MiB");
  out += line;
  row("parameters", r.parameters);
  row("gradients", r.gradients);
  row("optimizer state", r.optimizerState);
  row("inputs/outputs", r.inputsOutputs);
  row("alignment padding", r.padding);
  row("activations (saved)", r.activations);
  row("workspace", r.workspace);
  row("peak", r.peakBytes);
  if (r.measuredPeakBytes >= 0)
    row("measured peak", r.measuredPeakBytes);
  std::snprintf(line, sizeof line, "  %-28s %16lld\n", "parameter count",
                (long long)r.parameterCount);
  out += line;
  if (r.pipelineInFlight > 0) {
    out += "host memory outside the arena:\n";
    row("pipeline stash (" + std::to_string(r.pipelineInFlight) +
            " micro-batch" +
            (r.pipelineChunks > 1 ? " chunk" : "") +
            (r.pipelineInFlight == 1 ? "" : r.pipelineChunks > 1 ? "s" : "es") +
            ")",
        r.pipelineStashBytes);
  }
  if (r.hostPeakBytes > 0) {
    out += "host arena (ZeRO-Offload, outside the peak above):\n";
    if (r.hostParameters > 0)
      row("parameter shards", r.hostParameters);
    row("master weights (fp32)", r.hostMasterWeights);
    row("optimizer state", r.hostOptimizerState);
    row("workspace", r.hostWorkspace);
    row("host peak", r.hostPeakBytes);
  }
  if (r.nvmeBytes > 0) {
    out += "NVMe swap file (ZeRO-Infinity, outside both arenas):\n";
    if (r.nvmeParameters > 0)
      row("parameter shards", r.nvmeParameters);
    row("master weights (fp32)", r.nvmeMasterWeights);
    row("optimizer state", r.nvmeOptimizerState);
    row("swap file", r.nvmeBytes);
  }
  out += "saved activations per layer:\n";
  for (size_t l = 0; l < r.layers.size(); ++l)
    row("layer " + std::to_string(l), r.layers[l]);
  row("outside layers", r.activationsOutsideLayers);
  out += "temp arena per function (lower bound: most bytes live at once):\n";
  for (const FunctionMemory &f : r.functions) {
    std::snprintf(line, sizeof line,
                  "  %-28s %16lld %12s  lower bound %lld (%d temps)\n",
                  ("@" + f.name).c_str(), (long long)f.tempBytes,
                  mib(f.tempBytes).c_str(), (long long)f.liveBytes,
                  f.numTemps);
    out += line;
  }
  return out;
}

std::string formatMemoryJson(const MemoryReport &r) {
  std::string out = "{\n";
  auto field = [&](const char *key, int64_t v) {
    out += std::string("  \"") + key + "\": " + std::to_string(v) + ",\n";
  };
  field("peak_bytes", r.peakBytes);
  field("parameters", r.parameters);
  field("gradients", r.gradients);
  field("optimizer_state", r.optimizerState);
  field("activations", r.activations);
  field("workspace", r.workspace);
  field("inputs_outputs", r.inputsOutputs);
  field("alignment_padding", r.padding);
  field("parameter_count", r.parameterCount);
  field("persistent_bytes", r.persistentBytes);
  field("temp_bytes", r.tempBytes);
  if (r.measuredPeakBytes >= 0)
    field("measured_peak_bytes", r.measuredPeakBytes);
  if (r.hostPeakBytes > 0) {
    field("host_peak_bytes", r.hostPeakBytes);
    field("host_parameters", r.hostParameters);
    field("host_master_weights", r.hostMasterWeights);
    field("host_optimizer_state", r.hostOptimizerState);
    field("host_workspace", r.hostWorkspace);
  }
  if (r.nvmeBytes > 0) {
    field("nvme_bytes", r.nvmeBytes);
    field("nvme_parameters", r.nvmeParameters);
    field("nvme_master_weights", r.nvmeMasterWeights);
    field("nvme_optimizer_state", r.nvmeOptimizerState);
  }
  if (r.pipelineInFlight > 0) {
    field("pipeline_stash_bytes", r.pipelineStashBytes);
    field("pipeline_in_flight", r.pipelineInFlight);
  }
  out += "  \"layers\": [";
  for (size_t l = 0; l < r.layers.size(); ++l)
    out += (l ? ", " : "") + std::to_string(r.layers[l]);
  out += "],\n";
  field("activations_outside_layers", r.activationsOutsideLayers);
  out += "  \"functions\": [";
  for (size_t i = 0; i < r.functions.size(); ++i) {
    const FunctionMemory &f = r.functions[i];
    out += std::string(i ? ", " : "") + "{\"name\": \"" + f.name +
           "\", \"temp_bytes\": " + std::to_string(f.tempBytes) +
           ", \"live_lower_bound_bytes\": " + std::to_string(f.liveBytes) +
           ", \"temps\": " + std::to_string(f.numTemps) + "}";
  }
  out += "]\n}\n";
  return out;
}

} // namespace dsc
