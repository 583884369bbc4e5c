//===- TrainerDiagnosis.cpp - Where a non-finite loss began ---------------===//
//
// A NaN loss is reported with where it first appears, before any guess:
// a weight or optimizer state that was already NaN or infinite (the
// initialisation, the loaded file or the previous update made it), or the
// first instruction of the forward and backward whose output is not finite
// (a LoRA scale, an embedding, a norm, ... out of range).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Trainer.h"

#include "TrainerDetail.h"


using namespace dsc::rt;
using namespace dsc::rt::detail;

std::string Trainer::whereNonFiniteBegins(const TokenFile &data) {
  std::vector<int> state;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const BufferRole role = prog.buffers[id].role;
    if (role == BufferRole::Param || role == BufferRole::OptState)
      state.push_back(int(id));
  }
  backend.download(storage, state);
  std::string mine;
  for (int id : state) {
    const Buffer &buf = prog.buffers[size_t(id)];
    const NonFinite kind = nonFiniteIn(buf.dtype, storage.data(id), buf.bytes());
    if (kind == NonFinite::None)
      continue;
    mine = (buf.role == BufferRole::Param ? "parameter '"
                                          : "optimizer state '") +
           buf.name + "' holds " +
           (kind == NonFinite::NaN ? "NaN" : "infinite values") +
           " before this step";
    break;
  }
  // Ranks hold different shards: they agree whether any found one, so
  // that all of them replay, or none.
  float found = mine.empty() ? 0.0f : 1.0f;
  comm.allReduce(&found, 1, ReduceOp::Max);
  if (found > 0) {
    if (mine.empty())
      mine = "a parameter or optimizer state of another rank holds NaN or "
             "infinite values before this step";
    if (step == 0)
      return mine + ": the initialisation made it (initializer_range, or "
                    "another init setting, out of range?)";
    return mine + ": the update of step " + std::to_string(step - 1) +
           " made it (the optimizer's lr, weight_decay, momentum, betas or "
           "eps out of range?)";
  }
  // Replaying one instruction at a time needs a backend that runs any
  // instruction list (the CPU backend) and a stage-free step, whose
  // collectives every rank reaches in the same order: each rank replays
  // the whole function, whatever it finds.
  if (pipelined() || std::string(backend.name()) != "cpu")
    return "";
  const Function &micro = prog.function("micro_step");
  const RngContext rng = loadMicroBatch(data, 0);
  std::string first;
  for (size_t k = 0; k < micro.body.size(); ++k) {
    const Instr &I = micro.body[k];
    Function one{micro.name, {I}};
    backend.run(prog, one, storage, rng);
    if (!first.empty())
      continue;
    for (int out : I.outputs) {
      const Buffer &buf = prog.buffers[size_t(out)];
      const NonFinite kind =
          nonFiniteIn(buf.dtype, storage.data(out), buf.bytes());
      if (kind != NonFinite::None) {
        first = std::string("the first ") +
                (kind == NonFinite::NaN ? "NaN" : "infinity") +
                " is an output" +
                (buf.name.empty() ? "" : " ('" + buf.name + "')") + " of " +
                opInfo(I.op).name +
                " (instruction " + std::to_string(k) + " of @micro_step" +
                (I.layer >= 0 ? ", layer " + std::to_string(I.layer) : "") +
                ") on micro-batch 0";
        break;
      }
    }
  }
  return first;
}
