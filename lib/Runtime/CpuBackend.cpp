//===- CpuBackend.cpp - Executes a Program function on the CPU -----------===//
//
// Each instruction is validated (checkInstr: buffer ids, element counts,
// attributes; then the dtypes, by the kernel family) and dispatched to its
// kernel family (Ops.def) in lib/Kernels (run<Family> of
// <Family>/<Family>Cpu.cpp).
// Kernels compute in f32; f16 and bf16 operands reach them as f32 copies,
// and their outputs are rounded into the 16-bit buffers afterwards
// (cpu::Exec). Every error is an rt::Error whose message starts with the opcode name.
//
//===----------------------------------------------------------------------===//

#include "CommThread.h"
#include "LaneShuffle.h"
#include "Common/CommonCpu.h"

#include "dsc/Program/InstrCheck.h"
#include "dsc/Runtime/CommsLog.h"
#include "dsc/Runtime/OpcodeProfile.h"
#include "dsc/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <omp.h>
#include <optional>
#include <xmmintrin.h>

namespace dsc::rt {

namespace {

/// Subnormal floats cost x86 cores microcode assists: a GEMM or kernel over
/// them runs several times slower, and a stalled run's activations and
/// gradients fill with them (800 steps of a stalled 1-bit Adam run of the
/// 1-bit Adam bench's model B took 34 s, 4.3 s flushed). The CPU backend
/// flushes them to zero, as TensorFlow's CPU kernels do: FTZ and DAZ in
/// MXCSR of this thread and of every OpenMP thread (OpenBLAS runs in the
/// calling thread: configureBlasThreads).
void flushSubnormalsToZero() {
  constexpr unsigned kFtzDaz = 0x8040;
  _mm_setcsr(_mm_getcsr() | kFtzDaz);
#pragma omp parallel
  _mm_setcsr(_mm_getcsr() | kFtzDaz);
}

/// Ranks on one node share its cores: unless OMP_NUM_THREADS says
/// otherwise, each rank takes its share (torchrun sets OMP_NUM_THREADS=1
/// for the same reason). Threads that outnumber the cores spin against each
/// other and slow every rank down many times.
void shareCoresWithLocalRanks(int localRanks) {
  if (localRanks <= 1 || std::getenv("OMP_NUM_THREADS"))
    return;
  omp_set_num_threads(std::max(1, omp_get_num_procs() / localRanks));
}

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(Communicator &comm)
      : comm(comm),
        profile(profileRequested() ? std::make_unique<OpcodeProfile>("cpu")
                                   : nullptr) {
    shareCoresWithLocalRanks(comm.localSize());
    cpu::configureBlasThreads();
    flushSubnormalsToZero();
    laneShuffle = laneShuffleSeed();
  }
  const char *name() const override { return "cpu"; }

  void prepare(const Program &program) override {
    // The mesh's groups (a collective over the job).
    const Mesh mesh = program.mesh();
    if (!groups || groups->mesh() != mesh)
      groups = std::make_unique<MeshGroups>(comm, mesh);
  }

  bool setCommsLog(CommsLog *log) override {
    commsLog = log;
    return true;
  }

  void run(const Program &program, const Function &fn, Storage &storage,
           const RngContext &rng) override {
    prepare(program);
    runningFunction = fn.name;
    if (laneShuffle) {
      // A fresh order per call (LaneShuffle.h); none without host steps.
      const std::vector<size_t> order =
          shuffledLaneOrder(program, fn, *laneShuffle + shuffledCalls++);
      for (size_t i : order)
        execute(program, storage, fn.body[i], rng);
      if (!order.empty())
        return;
    }
    // overlap_comm: the collectives on a communication thread; the NVMe
    // swap file's reads and writes on an I/O thread (not while profiling,
    // whose times would then overlap).
    const bool collectivesBeside =
        program.metaInt("overlap_comm", 0, 0) != 0 &&
        comm.callableFromAnotherThread();
    const bool swapsBeside = program.nvmeBytes > 0;
    if (!profile && (collectivesBeside || swapsBeside)) {
      if (!commThread)
        commThread = std::make_unique<CommThread>();
      if (!ioThread)
        ioThread = std::make_unique<CommThread>();
      runOverlapped(program, fn, storage, rng, collectivesBeside);
      return;
    }
    for (const Instr &instr : fn.body) {
      if (!profile) {
        execute(program, storage, instr, rng);
        continue;
      }
      auto start = std::chrono::steady_clock::now();
      execute(program, storage, instr, rng);
      profile->addWork(program, {&instr},
                       std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count());
    }
  }

private:
  void execute(const Program &P, Storage &S, const Instr &I,
               const RngContext &rng);
  /// Runs `fn` with the NVMe swaps on the I/O thread and, with
  /// `collectivesBeside`, the collectives on the communication thread.
  void runOverlapped(const Program &P, const Function &fn, Storage &S,
                     const RngContext &rng, bool collectivesBeside);
  void dispatch(cpu::Exec &e);
  void runCollective(cpu::Exec &e);
  /// Runs a collective; returns the bytes of its message when they depend
  /// on the data (expert parallelism's rows), else -1.
  int64_t exchange(cpu::Exec &e, Communicator &group, int64_t bytes);
  Communicator &comm;
  CommsLog *commsLog = nullptr;
  /// The function run() runs (comms_logger's debug names it).
  std::string runningFunction;
  std::unique_ptr<MeshGroups> groups;
  std::unique_ptr<OpcodeProfile> profile;
  std::unique_ptr<CommThread> commThread;
  /// ZeRO-Infinity: swap_in and swap_out, in program order, beside the
  /// compute (the same hazard tracking as the collectives').
  std::unique_ptr<CommThread> ioThread;
  /// DSC_CPU_LANE_SHUFFLE's seed, and the calls run with it so far.
  std::optional<uint64_t> laneShuffle;
  uint64_t shuffledCalls = 0;
};

void CpuBackend::runOverlapped(const Program &P, const Function &fn,
                               Storage &S, const RngContext &rng,
                               bool collectivesBeside) {
  auto ranges = [&](const std::vector<int> &ids) {
    ByteRanges r;
    for (int id : ids) {
      const auto begin = reinterpret_cast<uintptr_t>(S.data(id));
      r.emplace_back(begin, begin + P.buffers[size_t(id)].bytes());
    }
    return r;
  };
  auto drainBoth = [&] {
    commThread->drain();
    ioThread->drain();
  };
  try {
    for (const Instr &I : fn.body) {
      ByteRanges reads = ranges(I.inputs), writes = ranges(I.outputs);
      commThread->waitFor(reads, writes);
      ioThread->waitFor(reads, writes);
      if (I.op == Opcode::SwapIn || I.op == Opcode::SwapOut) {
        // In program order on the one I/O thread: a state's write back
        // precedes the next step's read of it.
        ioThread->submit([this, &P, &S, &I, rng] { execute(P, S, I, rng); },
                         std::move(reads), std::move(writes));
        continue;
      }
      if (!collectivesBeside ||
          opInfo(I.op).kernels != KernelFamily::Collective) {
        execute(P, S, I, rng);
        continue;
      }
      // Every collective goes through the one thread, in program order:
      // the communicators are never used from two threads at once.
      commThread->submit([this, &P, &S, &I, rng] { execute(P, S, I, rng); },
                         std::move(reads), std::move(writes));
      if (!runsBesideCompute(I.op))
        commThread->drain();
    }
    drainBoth();
  } catch (...) {
    // Nothing of this call may still be running when the error leaves.
    for (CommThread *thread : {commThread.get(), ioThread.get()})
      try {
        thread->drain();
      } catch (...) {
      }
    throw;
  }
}

void CpuBackend::execute(const Program &P, Storage &S, const Instr &I,
                         const RngContext &rng) {
  const InstrDims d = checkInstr(P, I);
  cpu::Exec e(P, S, I, d, rng);
  dispatch(e);
  e.commit();
}

void CpuBackend::dispatch(cpu::Exec &e) {
  if (opInfo(e.I.op).kernels == KernelFamily::Collective)
    return runCollective(e);
  cpu::runKernels(e);
}

} // namespace

void cpu::runKernels(cpu::Exec &e) {
  switch (opInfo(e.I.op).kernels) {
  case KernelFamily::Elementwise:
    return cpu::runElementwise(e);
  case KernelFamily::Norms:
    return cpu::runNorms(e);
  case KernelFamily::Attention:
    return cpu::runAttention(e);
  case KernelFamily::EmbeddingLoss:
    return cpu::runEmbeddingLoss(e);
  case KernelFamily::Optimizers:
    return cpu::runOptimizers(e);
  case KernelFamily::Gemm:
    return cpu::runGemm(e);
  case KernelFamily::Collective:
    break;
  case KernelFamily::Compression:
    return cpu::runCompression(e);
  case KernelFamily::Gated:
    return cpu::runGated(e);
  case KernelFamily::Rotary:
    return cpu::runRotary(e);
  case KernelFamily::Quantized:
    return cpu::runQuantized(e);
  case KernelFamily::Moe:
    return cpu::runMoe(e);
  }
  throw Error("invalid kernel family of " + std::string(opcodeName(e.I.op)));
}

namespace {

/// How comms_logger names a collective, the kind that sets its bus
/// bandwidth, and its message in multiples of the instruction's bytes (the
/// whole tensor, not one rank's part); null name: not logged (no
/// communication, or the all-reduces inside a vocabulary-parallel kernel).
struct LoggedAs {
  const char *name;
  CollectiveKind kind;
  bool timesGroup;
};

LoggedAs loggedAs(Opcode op) {
  switch (asFamily<CollectiveOpcode>(op)) {
  case CollectiveOpcode::AllReduce:
  case CollectiveOpcode::TpReduce:
  case CollectiveOpcode::NormAllReduce:
    return {"all_reduce", CollectiveKind::AllReduce, false};
  case CollectiveOpcode::ReduceScatter:
    return {"reduce_scatter", CollectiveKind::ReduceScatter, true};
  case CollectiveOpcode::AllGather:
    return {"all_gather", CollectiveKind::AllGather, true};
  case CollectiveOpcode::AllToAll:
    return {"all_to_all", CollectiveKind::AllToAll, true};
  case CollectiveOpcode::Broadcast:
    return {"broadcast", CollectiveKind::Broadcast, false};
  case CollectiveOpcode::Send:
    return {"send", CollectiveKind::Send, false};
  case CollectiveOpcode::Recv:
    return {"recv", CollectiveKind::Send, false};
  case CollectiveOpcode::MoeExchangeCounts:
  case CollectiveOpcode::MoeExchange: // DeepSpeed-MoE's all_to_all_single
    return {"all_to_all", CollectiveKind::AllToAll, false};
  case CollectiveOpcode::Shard:
  case CollectiveOpcode::VocabEmbedding:
  case CollectiveOpcode::VocabEmbeddingGrad:
  case CollectiveOpcode::VocabCrossEntropy:
  case CollectiveOpcode::VocabCrossEntropyGrad:
    break;
  }
  return {nullptr, CollectiveKind::Count, false};
}

void CpuBackend::runCollective(cpu::Exec &e) {
  Communicator &group = groups->group(e.d.axis);
  // The instruction's tensor (one rank's part, one peer's chunk) in bytes.
  const int64_t bytes = e.d.n * int64_t(dtypeSize(
                                    e.I.inputs.empty() ? e.out(0).dtype
                                                       : e.in(0).dtype));
  const LoggedAs as = commsLog && group.size() > 1 ? loggedAs(e.I.op)
                                                   : LoggedAs{};
  if (!as.name || !commsLog->wants(as.name)) {
    exchange(e, group, bytes);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t moved = exchange(e, group, bytes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t message =
      moved >= 0                      ? moved
      : e.I.op == Opcode::NormAllReduce ? int64_t(sizeof(float))
      : as.timesGroup                 ? bytes * group.size()
                                      : bytes;
  commsLog->record(as.name, as.kind, runningFunction, message, group.size(),
                   seconds);
}

int64_t CpuBackend::exchange(cpu::Exec &e, Communicator &group,
                             int64_t bytes) {
  const int64_t rank = group.rank();
  // Send / Recv: the rank `peer` steps along the axis, wrapping around.
  const int peer = int(((rank + e.d.peer) % e.d.group + e.d.group) % e.d.group);
  switch (asFamily<CollectiveOpcode>(e.I.op)) {
  case CollectiveOpcode::AllReduce:
  case CollectiveOpcode::TpReduce:
    group.allReduce(e.inPlace(0, 0, "tensor"), e.d.n, e.d.reduce);
    return -1;
  case CollectiveOpcode::ReduceScatter:
    group.reduceScatter(e.fin(0, "input"), e.fout(0, "result"), e.d.n,
                        e.d.reduce);
    return -1;
  case CollectiveOpcode::AllGather: // any element type: bytes
    group.allGather(e.S.data(e.inId(0)), e.S.data(e.outId(0)), bytes);
    return -1;
  case CollectiveOpcode::AllToAll:
    group.allToAll(e.S.data(e.inId(0)), e.S.data(e.outId(0)), bytes);
    return -1;
  case CollectiveOpcode::Broadcast:
    if (e.inId(0) != e.outId(0))
      cpu::copyBytes(e.S.data(e.outId(0)), e.S.data(e.inId(0)), size_t(bytes));
    group.broadcast(e.S.data(e.outId(0)), bytes, int(e.d.peer));
    return -1;
  case CollectiveOpcode::Send:
    group.send(e.S.data(e.inId(0)), bytes, peer);
    return -1;
  case CollectiveOpcode::Recv:
    group.recv(e.S.data(e.outId(0)), bytes, peer);
    return -1;
  case CollectiveOpcode::Shard: // this rank's part: no communication
    cpu::copyBytes(e.fout(0, "result"), e.fin(0, "input") + rank * e.d.n,
                   size_t(e.d.n) * sizeof(float));
    return -1;
  case CollectiveOpcode::VocabEmbedding:
  case CollectiveOpcode::VocabEmbeddingGrad:
  case CollectiveOpcode::VocabCrossEntropy:
  case CollectiveOpcode::VocabCrossEntropyGrad:
    cpu::runVocabParallel(e, group);
    return -1;
  case CollectiveOpcode::MoeExchangeCounts:
  case CollectiveOpcode::MoeExchange:
    return cpu::runExpertExchange(e, group);
  case CollectiveOpcode::NormAllReduce: {
    float sumSquares = e.scalarIn(0, "norm") * e.scalarIn(0, "norm");
    group.allReduce(&sumSquares, 1, ReduceOp::Sum);
    e.fout(0, "result")[0] = std::sqrt(sumSquares);
    return -1;
  }
  }
  e.fail("internal: not a collective opcode");
}

} // namespace

void runOnHost(const Program &P, Storage &S, const Instr &I,
               const RngContext &rng, int localRanks) {
  // Another backend's thread (a CUDA host node's): OpenMP's thread count
  // and MXCSR are per thread, so it is set up here once.
  thread_local bool setUp = false;
  if (!setUp) {
    shareCoresWithLocalRanks(localRanks);
    flushSubnormalsToZero();
    setUp = true;
  }
  const InstrDims d = checkInstr(P, I);
  if (opInfo(I.op).kernels == KernelFamily::Collective)
    throw Error(std::string(opcodeName(I.op)) +
                ": a collective does not run on the host alone");
  cpu::Exec e(P, S, I, d, rng);
  cpu::runKernels(e);
  e.commit();
}

std::unique_ptr<Backend> createCpuBackend(Communicator &comm) {
  return std::make_unique<CpuBackend>(comm);
}

} // namespace dsc::rt
