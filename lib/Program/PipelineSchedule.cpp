//===- PipelineSchedule.cpp - Micro-batch orders of pipeline stages -------===//

#include "dsc/Program/PipelineSchedule.h"

#include "dsc/Program/Program.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace dsc::rt {

PipelineScheduleKind pipelineScheduleNamed(const std::string &name) {
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::GPipe, PipelineScheduleKind::OneFOneB,
        PipelineScheduleKind::Interleaved})
    if (name == pipelineScheduleName(kind))
      return kind;
  throw Error("pipeline schedule must be \"1f1b\", \"interleaved\" or "
              "\"gpipe\", got \"" + name + "\"");
}

const char *pipelineScheduleName(PipelineScheduleKind kind) {
  switch (kind) {
  case PipelineScheduleKind::GPipe:
    return "gpipe";
  case PipelineScheduleKind::OneFOneB:
    return "1f1b";
  case PipelineScheduleKind::Interleaved:
    return "interleaved";
  }
  return "?";
}

void checkPipelineShape(const PipelineShape &s) {
  if (s.stages < 1 || s.microBatches < 1 || s.chunks < 1)
    throw Error("pipeline: stages, micro-batches and chunks must be >= 1");
  if (s.kind != PipelineScheduleKind::Interleaved && s.chunks != 1)
    throw Error(std::string("pipeline: the ") + pipelineScheduleName(s.kind) +
                " schedule runs one model chunk per stage, not " +
                std::to_string(s.chunks) + " (use the interleaved schedule)");
  if (s.kind == PipelineScheduleKind::Interleaved &&
      s.microBatches % s.stages != 0)
    throw Error("pipeline: the interleaved schedule needs the micro-batches (" +
                std::to_string(s.microBatches) +
                ") to be a multiple of the stages (" +
                std::to_string(s.stages) + ")");
}

/// The forwards a 1F1B (or interleaved) stage runs before its first
/// backward.
static int64_t warmupForwards(const PipelineShape &shape, int64_t stage) {
  const int64_t P = shape.stages, m = shape.microBatches, v = shape.chunks;
  if (v == 1)
    return std::min(P - stage - 1, m);
  if (m == P) // Megatron: every forward goes first
    return m * v;
  return std::min((P - stage - 1) * 2 + (v - 1) * P, m * v);
}

double pipelineBubbleFormula(const PipelineShape &shape) {
  checkPipelineShape(shape);
  const double P = double(shape.stages);
  return (P - 1) / (double(shape.chunks * shape.microBatches) + P - 1);
}

int64_t pipelinePeakInFlight(const PipelineShape &shape, int64_t stage) {
  checkPipelineShape(shape);
  const int64_t total = shape.microBatches * shape.chunks;
  if (shape.kind == PipelineScheduleKind::GPipe)
    return total;
  return std::min(warmupForwards(shape, stage) + 1, total);
}

std::vector<PipelineAction> pipelineOrder(const PipelineShape &shape,
                                          int64_t stage) {
  checkPipelineShape(shape);
  const int64_t P = shape.stages, m = shape.microBatches, v = shape.chunks;
  if (stage < 0 || stage >= P)
    throw Error("pipeline: stage " + std::to_string(stage) +
                " is not one of the " + std::to_string(P) + " stages");
  std::vector<PipelineAction> order;
  using A = PipelineAction;
  if (shape.kind == PipelineScheduleKind::GPipe) {
    for (int64_t mb = 0; mb < m; ++mb)
      order.push_back({A::Forward, mb, 0});
    for (int64_t mb = 0; mb < m; ++mb)
      order.push_back({A::Backward, mb, 0});
    return order;
  }
  // 1F1B, and Megatron-LM's interleaved form of it (v = 1 is plain 1F1B):
  // the k-th forward of a rank takes micro-batches in groups of P through
  // chunk 0, then the same group through chunk 1, ...; backwards walk the
  // chunks the other way.
  const int64_t total = m * v;
  auto microBatchOf = [&](int64_t k) { return k / (P * v) * P + k % P; };
  auto chunkOf = [&](int64_t k) { return k % (P * v) / P; };
  const int64_t warmup = warmupForwards(shape, stage);
  auto forward = [&](int64_t k) {
    order.push_back({A::Forward, microBatchOf(k), chunkOf(k)});
  };
  auto backward = [&](int64_t k) {
    order.push_back({A::Backward, microBatchOf(k), v - 1 - chunkOf(k)});
  };
  for (int64_t k = 0; k < warmup; ++k)
    forward(k);
  for (int64_t k = 0; k < total - warmup; ++k) {
    forward(warmup + k);
    backward(k);
  }
  for (int64_t k = total - warmup; k < total; ++k)
    backward(k);
  return order;
}

PipelineTimeline simulatePipeline(const PipelineShape &shape,
                                  double forwardCost, double backwardCost) {
  checkPipelineShape(shape);
  const size_t chunks = size_t(shape.stages * shape.chunks);
  return simulatePipeline(
      shape, std::vector<double>(chunks, forwardCost / double(shape.chunks)),
      backwardCost / forwardCost);
}

PipelineTimeline simulatePipeline(const PipelineShape &shape,
                                  const std::vector<double> &forwardCosts,
                                  double backwardOverForward) {
  checkPipelineShape(shape);
  const int64_t P = shape.stages, v = shape.chunks;
  if (forwardCosts.size() != size_t(P * v))
    throw Error("pipeline: " + std::to_string(forwardCosts.size()) +
                " chunk costs for " + std::to_string(P * v) + " chunks");
  const int64_t last = P * v - 1; // the last virtual stage
  std::vector<std::vector<PipelineAction>> orders;
  for (int64_t s = 0; s < P; ++s)
    orders.push_back(pipelineOrder(shape, s));

  // Finish time of (kind, micro-batch, virtual stage c * P + s).
  std::map<std::tuple<int, int64_t, int64_t>, double> finished;
  auto doneAt = [&](PipelineAction::Kind kind, int64_t mb,
                    int64_t virtualStage) -> const double * {
    auto it = finished.find({int(kind), mb, virtualStage});
    return it == finished.end() ? nullptr : &it->second;
  };
  std::vector<size_t> next(size_t(P), 0);
  std::vector<double> freeAt(size_t(P), 0.0);
  PipelineTimeline t;
  t.peakInFlight.assign(size_t(P), 0);
  std::vector<int64_t> inFlight(size_t(P), 0);
  size_t remaining = 0;
  for (auto &o : orders)
    remaining += o.size();
  while (remaining) {
    bool progress = false;
    for (int64_t s = 0; s < P; ++s) {
      // Run this stage's actions for as long as their inputs are ready.
      while (next[size_t(s)] < orders[size_t(s)].size()) {
        const PipelineAction &a = orders[size_t(s)][next[size_t(s)]];
        const int64_t vs = a.chunk * P + s;
        const double *ready = nullptr;
        double zero = 0;
        if (a.kind == PipelineAction::Forward)
          ready = vs == 0 ? &zero : doneAt(PipelineAction::Forward,
                                          a.microBatch, vs - 1);
        else
          ready = vs == last ? doneAt(PipelineAction::Forward, a.microBatch, vs)
                             : doneAt(PipelineAction::Backward, a.microBatch,
                                      vs + 1);
        if (!ready)
          break;
        const double forward = forwardCosts[size_t(vs)];
        const double cost = a.kind == PipelineAction::Forward
                                ? forward
                                : forward * backwardOverForward;
        const double end = std::max(freeAt[size_t(s)], *ready) + cost;
        freeAt[size_t(s)] = end;
        finished[{int(a.kind), a.microBatch, vs}] = end;
        inFlight[size_t(s)] += a.kind == PipelineAction::Forward ? 1 : -1;
        t.peakInFlight[size_t(s)] =
            std::max(t.peakInFlight[size_t(s)], inFlight[size_t(s)]);
        ++next[size_t(s)];
        --remaining;
        progress = true;
      }
    }
    if (!progress)
      throw Error(std::string("pipeline: the ") +
                  pipelineScheduleName(shape.kind) + " orders deadlock");
  }
  t.length = *std::max_element(freeAt.begin(), freeAt.end());
  double idle = 0;
  for (int64_t s = 0; s < P; ++s) {
    double busy = 0;
    for (int64_t c = 0; c < v; ++c)
      busy += double(shape.microBatches) * forwardCosts[size_t(c * P + s)] *
              (1 + backwardOverForward);
    t.idle.push_back(t.length - busy);
    idle += t.length - busy;
  }
  t.bubbleFraction = t.length > 0 ? idle / (double(P) * t.length) : 0;
  return t;
}

std::string pipelineChunkName(const std::string &name, int64_t chunk) {
  return chunk == 0 ? name : name + "." + std::to_string(chunk);
}

std::vector<int> pipelineStashBuffers(const Program &prog, int64_t chunk) {
  auto named = [&](const std::string &name) {
    return pipelineChunkName(name, chunk);
  };
  std::set<int> written, read;
  for (const Instr &instr : prog.function(named("stage_forward")).body)
    written.insert(instr.outputs.begin(), instr.outputs.end());
  const int received =
      prog.findBuffer(BufferRole::Input, named("stage_input"));
  if (received >= 0)
    written.insert(received);
  for (const Instr &instr : prog.function(named("micro_step")).body)
    read.insert(instr.inputs.begin(), instr.inputs.end());
  std::vector<int> kept;
  for (int id : written) {
    const BufferRole role = prog.buffers[size_t(id)].role;
    if (read.count(id) &&
        (role == BufferRole::Input || role == BufferRole::Output))
      kept.push_back(id);
  }
  return kept;
}

PipelineStash pipelineStashOf(const Program &prog) {
  PipelineStash s;
  if (!prog.functions.count("stage_forward"))
    return s;
  s.stage = prog.metaInt("pipeline_stage", std::nullopt, 0);
  s.shape.kind = pipelineScheduleNamed(prog.metaString("pipeline_schedule"));
  s.shape.stages = prog.mesh().pipeline;
  s.shape.microBatches = prog.metaInt("grad_accum", std::nullopt, 1);
  s.shape.chunks = prog.metaInt("pipeline_chunks", 1, 1);
  for (int64_t k = 0; k < s.shape.chunks; ++k) {
    int64_t bytes = 0;
    for (int id : pipelineStashBuffers(prog, k))
      bytes += int64_t(prog.buffers[size_t(id)].bytes());
    s.bytesPerChunk.push_back(bytes);
  }
  return s;
}

int64_t PipelineStash::peakBytes() const {
  if (stage < 0)
    return 0;
  // The schedule's own order: a forward stashes its chunk's bytes until
  // the micro-batch's backward through that chunk.
  int64_t held = 0, peak = 0;
  for (const PipelineAction &a : pipelineOrder(shape, stage)) {
    const int64_t bytes = bytesPerChunk[size_t(a.chunk)];
    held += a.kind == PipelineAction::Forward ? bytes : -bytes;
    peak = std::max(peak, held);
  }
  return peak;
}

} // namespace dsc::rt
