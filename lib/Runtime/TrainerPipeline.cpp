//===- TrainerPipeline.cpp - Trainer: the pipeline-stage driver -----------===//
//
// A pipeline stage's side of the Trainer: its boundary buffers, its
// schedule's forwards and backwards with the sends and receives between
// stages, the tied gradients of the first and last stage, and files whose
// tensors meet on the first stage.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Trainer.h"

#include "TrainerDetail.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::detail;

Trainer::StageBuffers Trainer::resolveStage(int64_t stage,
                                            int64_t stages) const {
  if (prog.metaInt("pipeline_stage", -1, -1) != stage)
    throw Error("rank " + std::to_string(comm.rank()) + " holds pipeline "
                "stage " + std::to_string(stage) + " but its step is " +
                (prog.meta.count("pipeline_stage")
                     ? "stage " + std::to_string(
                                      prog.metaInt("pipeline_stage", -1, -1))
                     : std::string("not cut into stages")) +
                " (each rank compiles its own stage)");
  const bool first = stage == 0, last = stage == stages - 1;
  StageBuffers b;
  b.shape.kind = pipelineScheduleNamed(prog.metaString("pipeline_schedule"));
  b.shape.stages = stages;
  b.shape.microBatches = A;
  b.shape.chunks = prog.metaInt("pipeline_chunks", 1, 1);
  checkPipelineShape(b.shape);
  // The driver's message tags name each virtual-stage boundary and
  // direction (runPipelineSchedule); MPI promises tags up to 32767.
  if (2 * b.shape.stages * b.shape.chunks + 1 > 32767)
    throw Error("pipeline: " + std::to_string(b.shape.stages) + " stages x " +
                std::to_string(b.shape.chunks) +
                " model chunks are more virtual stages than the driver's "
                "message tags can name (at most 16383)");
  // A stage's activations travel as bytes: what it receives and the
  // gradient it sends back have one shape, as do what it sends and the
  // gradient it gets back.
  auto samePair = [&](int x, int y) {
    const Buffer &a = prog.buffers[size_t(x)], &c = prog.buffers[size_t(y)];
    if (a.dtype != DType::F32 || a.dtype != c.dtype || a.shape != c.shape)
      throw Error("compiled step: pipeline buffers '" + a.name + "' and '" +
                  c.name + "' must be f32 of one shape");
  };
  const int64_t v = b.shape.chunks;
  for (int64_t k = 0; k < v; ++k) {
    auto named = [&](const std::string &name) {
      return pipelineChunkName(name, k);
    };
    ChunkBuffers c;
    c.forward = named("stage_forward");
    c.backward = named("micro_step");
    if (!(first && k == 0)) {
      c.input = buffer(BufferRole::Input, named("stage_input"));
      c.inputGrad = buffer(BufferRole::Output, named("stage_input_grad"));
      samePair(c.input, c.inputGrad);
    }
    if (!(last && k == v - 1)) {
      c.output = buffer(BufferRole::Output, named("stage_output"));
      c.outputGrad = buffer(BufferRole::Input, named("stage_output_grad"));
      samePair(c.output, c.outputGrad);
    } else {
      c.loss = buffer(BufferRole::Output, "loss");
    }
    prog.function(c.forward); // throws naming a missing one
    prog.function(c.backward);
    c.kept = pipelineStashBuffers(prog, k);
    b.chunks.push_back(std::move(c));
  }
  // The first and the last stage add their gradients of the parameters
  // both hold (comma-separated names).
  if (first || last) {
    const std::string names = prog.metaString("pipeline_tied_params", "");
    for (size_t at = 0; at < names.size();) {
      size_t end = names.find(',', at);
      if (end == std::string::npos)
        end = names.size();
      const int id = buffer(BufferRole::GradAcc,
                            "grad/" + names.substr(at, end - at));
      if (prog.buffers[size_t(id)].dtype != DType::F32)
        throw Error("compiled step: tied gradient '" +
                    prog.buffers[size_t(id)].name + "' must be f32");
      b.tiedGrads.push_back(id);
      at = end + 1;
    }
  }
  return b;
}

void Trainer::gatherStages(Safetensors &file) const {
  if (!pipelined() || !stageWriter())
    return;
  // The writers form the pipeline group of rank 0.
  Communicator &pipe = pipelineGroup();
  if (pipe.rank() != 0) {
    Safetensors part;
    part.tensors = std::move(file.tensors);
    const std::string bytes = part.serialize("pipeline stage");
    int64_t size = int64_t(bytes.size());
    pipe.send(&size, sizeof size, 0);
    pipe.send(bytes.data(), size, 0);
    return;
  }
  for (int s = 1; s < pipe.size(); ++s) {
    int64_t size = 0;
    pipe.recv(&size, sizeof size, s);
    std::string bytes(size_t(size), '\0');
    pipe.recv(bytes.data(), size, s);
    Safetensors part = Safetensors::parse(
        bytes, "pipeline stage " + std::to_string(s) + "'s tensors");
    // A tied parameter is on two stages with equal values: the first
    // stage's copy is kept (and so is its optimizer state).
    for (auto &[name, tensor] : part.tensors)
      file.tensors.emplace(name, std::move(tensor));
  }
}

void Trainer::requireUsedByARank(
    const std::set<std::string> &names, const std::set<std::string> &used,
    const std::function<std::string(const std::string &)> &message) const {
  // Per name, whether this rank used it; the maximum over the stages and
  // the expert-parallel ranks.
  std::vector<float> usedHere;
  for (const std::string &name : names)
    usedHere.push_back(used.count(name) ? 1.0f : 0.0f);
  if (pipelined() && !usedHere.empty())
    pipelineGroup().allReduce(usedHere.data(), int64_t(usedHere.size()),
                              ReduceOp::Max);
  const bool expertParallel =
      std::any_of(prog.buffers.begin(), prog.buffers.end(),
                  [](const Buffer &b) { return b.expertShard; });
  if (expertParallel && !usedHere.empty())
    groups->group(MeshAxis::DataInner)
        .allReduce(usedHere.data(), int64_t(usedHere.size()), ReduceOp::Max);
  size_t i = 0;
  for (const std::string &name : names)
    if (usedHere[i++] == 0.0f)
      throw Error(message(name));
}

Trainer::ScheduleRun Trainer::runPipelineSchedule(const TokenFile &data) {
  using Clock = std::chrono::steady_clock;
  ScheduleRun run;
  auto waited = [&](Clock::time_point since) {
    run.waitSeconds +=
        std::chrono::duration<double>(Clock::now() - since).count();
  };
  Communicator &pipe = pipelineGroup();
  const int s = pipe.rank(), P = pipe.size();
  const StageBuffers &b = *stageBuffers;
  // Chunk k holds virtual stage s + k*P: its activations come from the
  // rank before (chunk k - 1 of the last rank, for rank 0) and go to the
  // rank after. A message's tag names the boundary it crosses and its
  // direction, so the two that two ranks may exchange (an activation one
  // way, a gradient the other, or several chunks') never mix; per tag, MPI
  // keeps the order, which is the micro-batches' on both ends.
  const int before = (s + P - 1) % P, after = (s + 1) % P;
  auto tag = [&](int64_t boundary, bool gradient) {
    return int(2 * boundary + (gradient ? 1 : 0) + 1);
  };
  // The kept buffers of the micro-batch chunks whose backward has not run,
  // and every send of the step until it has completed.
  std::vector<std::vector<char>> inFlight(
      static_cast<size_t>(A * b.shape.chunks));
  std::vector<std::vector<char>> outbox;
  outbox.reserve(size_t(2 * A * b.shape.chunks));
  auto sendBuffer = [&](int id, int to, int tag) {
    backend.download(storage, {id});
    const char *bytes = static_cast<const char *>(storage.data(id));
    outbox.emplace_back(bytes, bytes + prog.buffers[size_t(id)].bytes());
    pipe.startSend(outbox.back().data(), int64_t(outbox.back().size()), to,
                   tag);
  };
  auto receive = [&](int id, int from, int tag) {
    const auto since = Clock::now();
    pipe.recv(storage.data(id), int64_t(prog.buffers[size_t(id)].bytes()),
              from, tag);
    waited(since);
    backend.upload(storage, {id});
  };
  int64_t stashBytes = 0;
  for (const PipelineAction &action : pipelineOrder(b.shape, s)) {
    const int64_t m = action.microBatch;
    const ChunkBuffers &c = b.chunks[size_t(action.chunk)];
    const int64_t virtualStage = s + action.chunk * P;
    std::vector<char> &stash = inFlight[size_t(action.chunk * A + m)];
    const RngContext rng = loadMicroBatch(data, m);
    if (action.kind == PipelineAction::Forward) {
      if (c.input >= 0)
        receive(c.input, before, tag(virtualStage, false));
      backend.run(prog, prog.function(c.forward), storage, rng);
      backend.download(storage, c.kept);
      for (int id : c.kept) {
        const char *bytes = static_cast<const char *>(storage.data(id));
        stash.insert(stash.end(), bytes,
                     bytes + prog.buffers[size_t(id)].bytes());
      }
      stashBytes += int64_t(stash.size());
      run.stashPeakBytes = std::max(run.stashPeakBytes, stashBytes);
      if (c.loss >= 0) {
        backend.download(storage, {c.loss});
        run.lossSum += storage.f32(c.loss)[0];
      } else {
        sendBuffer(c.output, after, tag(virtualStage + 1, false));
      }
      continue;
    }
    size_t at = 0;
    for (int id : c.kept) {
      const size_t bytes = prog.buffers[size_t(id)].bytes();
      std::memcpy(storage.data(id), stash.data() + at, bytes);
      at += bytes;
    }
    stashBytes -= int64_t(stash.size());
    stash = {};
    backend.upload(storage, c.kept);
    if (c.outputGrad >= 0)
      receive(c.outputGrad, after, tag(virtualStage + 1, true));
    backend.run(prog, prog.function(c.backward), storage, rng);
    if (c.inputGrad >= 0)
      sendBuffer(c.inputGrad, before, tag(virtualStage, true));
  }
  const auto since = Clock::now();
  pipe.waitSends();
  waited(since);
  return run;
}

void Trainer::sumTiedGradients() {
  Communicator &pipe = pipelineGroup();
  const int s = pipe.rank(), P = pipe.size();
  const int peer = s == 0 ? P - 1 : 0;
  for (int id : stageBuffers->tiedGrads) {
    backend.download(storage, {id});
    float *mine = storage.f32(id);
    const int64_t n = prog.buffers[size_t(id)].numElements();
    std::vector<float> sent(mine, mine + n), theirs(static_cast<size_t>(n));
    pipe.startSend(sent.data(), n * int64_t(sizeof(float)), peer);
    pipe.recv(theirs.data(), n * int64_t(sizeof(float)), peer);
    pipe.waitSends();
    // Both stages add the same two numbers: the copies stay equal.
    for (int64_t i = 0; i < n; ++i)
      mine[i] += theirs[size_t(i)];
    backend.upload(storage, {id});
  }
}
