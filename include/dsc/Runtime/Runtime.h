//===- Runtime.h - Executing a Program on a backend ------------*- C++ -*-===//
//
// The runtime half of dsc: storage for every buffer of a Program, the
// communicator, data loading, safetensors I/O and a Backend that runs one
// Function of the Program. Links no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_RUNTIME_H
#define DSC_RUNTIME_RUNTIME_H

#include "dsc/Program/Program.h"

#include <iterator>
#include <utility>
#include <memory>

namespace dsc::rt {

/// The collective kinds whose traffic a Communicator counts (the keys of
/// `--log-json`'s "comm_bytes").
enum class CollectiveKind {
  AllReduce, ReduceScatter, AllGather, AllToAll, Broadcast, Send, Count
};
const char *collectiveKindName(CollectiveKind kind);

/// Bytes this rank sent, per collective kind, by the bandwidth-optimal
/// (ring) algorithm's volume: an all-reduce of S bytes over N ranks sends
/// 2S(N-1)/N, a reduce-scatter of S bytes S(N-1)/N, an all-gather of S
/// bytes per rank S(N-1), an all-to-all of S bytes per peer S(N-1), a
/// broadcast of S bytes S(N-1) at the root (what the group receives in
/// all; the other ranks count 0), a send of S bytes S. One rank sends
/// nothing.
struct CommTraffic {
  int64_t bytes[int(CollectiveKind::Count)] = {};
  int64_t &operator[](CollectiveKind k) { return bytes[int(k)]; }
  int64_t operator[](CollectiveKind k) const { return bytes[int(k)]; }
};

/// Collectives between the ranks of a group (the whole job, or one mesh
/// axis's group: see split and MeshGroups). Every reduction in a Program
/// goes through this interface; nothing in the runtime assumes a single
/// rank. Every rank of the group must call the same collectives in the
/// same order; a send is matched by the peer's recv.
class CommsLog;

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The rank's index among the ranks of its node (picks its GPU), and
  /// how many ranks its node runs (they share its cores).
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;
  /// "Open MPI", "single process", ...
  virtual const char *transport() const = 0;
  /// Whether a thread other than the one that made it may call its
  /// collectives (never two at once): overlap_comm's communication thread.
  virtual bool callableFromAnotherThread() const { return true; }
  /// In place: the element-wise sum, mean or max of `n` floats of all ranks.
  virtual void allReduce(float *data, int64_t n, ReduceOp op) = 0;
  /// `out` (nPerRank floats) receives this rank's part, rank() * nPerRank
  /// onwards, of the element-wise reduction of every rank's `in` (size() *
  /// nPerRank floats).
  virtual void reduceScatter(const float *in, float *out, int64_t nPerRank,
                             ReduceOp op) = 0;
  /// `out` (size() * bytesPerRank bytes) receives every rank's `in` in rank
  /// order.
  virtual void allGather(const void *in, void *out, int64_t bytesPerRank) = 0;
  /// `in` and `out` hold size() chunks of bytesPerPeer bytes: chunk j of
  /// this rank's `in` becomes chunk rank() of rank j's `out`.
  virtual void allToAll(const void *in, void *out, int64_t bytesPerPeer) = 0;
  /// In place: every rank's `data` receives rank `root`'s `bytes` bytes.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  /// `bytes` bytes to rank `to` (returns once `data` may be reused), and
  /// from rank `from` into `data`. A receive matches the sends of its peer
  /// with the same `tag` (0 to 32767) in the order they were made.
  virtual void send(const void *data, int64_t bytes, int to, int tag = 0) = 0;
  virtual void recv(void *data, int64_t bytes, int from, int tag = 0) = 0;
  /// A send that returns at once: `data` must stay as it is until
  /// waitSends() returns. Pipeline stages send so, then two neighbours
  /// that send to each other do not wait for each other's receive.
  virtual void startSend(const void *data, int64_t bytes, int to,
                         int tag = 0) {
    send(data, bytes, to, tag);
  }
  /// Waits until every startSend of this communicator has completed.
  virtual void waitSends() {}
  /// The communicator of the ranks that pass the same `color`, ranked by
  /// `key` (ties: by rank here). Collective over this communicator: every
  /// rank calls it. The new communicator counts its traffic with this one.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  /// Waits for every rank. Also where ranks wait for rank 0 to write a
  /// file, so an MPI barrier allows 10 times DSC_COMM_TIMEOUT.
  virtual void barrier() = 0;
  const CommTraffic &traffic() const { return *sent; }
  /// Bytes a backend sent for this job over its own transport (NCCL).
  void countSent(CollectiveKind kind, int64_t bytes) { (*sent)[kind] += bytes; }

protected:
  /// Shared by the communicators split from one job's: the job's traffic.
  std::shared_ptr<CommTraffic> sent = std::make_shared<CommTraffic>();
};

/// The groups of a mesh: for each axis, the communicator of the ranks that
/// differ from this one only along it (the whole job where the axis has all
/// of its ranks, a one-rank communicator where it has one; without a split
/// of the data axis, data_outer is the data group). Built by every rank of
/// `world` at once (splitting is collective).
class MeshGroups {
public:
  MeshGroups(Communicator &world, const Mesh &mesh);
  Communicator &group(MeshAxis axis) { return *groups[int(axis)]; }
  const Mesh &mesh() const { return shape; }

private:
  static constexpr int kAxes = int(std::size(kMeshAxes));
  Mesh shape;
  std::unique_ptr<Communicator> owned[kAxes];
  Communicator *groups[kAxes] = {};
};

/// The communicator of a job with one process.
std::unique_ptr<Communicator> createSingleRankCommunicator();

/// The communicator the launcher asks for: MPI when the process was started
/// by mpirun/mpiexec or srun (their environment says so), over TCP when
/// started torchrun's way (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT and
/// no MPI launcher), else one rank. Throws, naming the variable or rank,
/// when the environment asks for several ranks that cannot be connected.
std::unique_ptr<Communicator> createCommunicator();

/// The number of ranks the launcher's environment announces (1 without a
/// launcher): commands that run in one process refuse to run as several.
int launchedWorldSize();
/// This process's rank as the launcher's environment announces it, before
/// any communicator exists (errors of the start-up name it); -1 in a
/// one-rank job or when the environment names none.
int launchedRank();
/// DSC_COMM_TIMEOUT: the seconds a rank waits in one collective before it
/// declares another rank lost (default 45; "0" waits forever).
double collectiveTimeoutSeconds();
/// The integer value of environment variable `name`, or `absent`; anything
/// but a plain integer in [min, max] is an error naming the variable.
long long envInteger(const char *name, long long absent, long long min,
                     long long max);

/// Host memory for every buffer of a Program, 64-byte aligned. A program
/// with a memory plan (Program::arenaBytes >= 0) gets one zeroed arena and
/// each buffer lives at arena + Buffer::offset (ZeRO-Offload's host
/// buffers in a second arena of Program::hostArenaBytes); otherwise every
/// buffer is allocated on its own.
class SwapFile;

class Storage {
public:
  explicit Storage(const Program &program);
  ~Storage();
  void *data(int buffer) {
    if (arena && !host[size_t(buffer)])
      noteUse(buffer);
    return ptrs[buffer];
  }
  /// ZeRO-Infinity: NVMe-resident buffer `buffer` (Buffer::nvme) read
  /// into `dst`, or written from `src`, through the swap file.
  void swapIn(int buffer, void *dst);
  void swapOut(int buffer, const void *src);
  float *f32(int buffer) { return static_cast<float *>(data(buffer)); }
  int32_t *i32(int buffer) { return static_cast<int32_t *>(data(buffer)); }
  int64_t *i64(int buffer) { return static_cast<int64_t *>(data(buffer)); }
  uint8_t *u8(int buffer) { return static_cast<uint8_t *>(data(buffer)); }
  size_t totalBytes() const { return total; }
  /// Planned programs: the arena's size (Program::arenaBytes); else 0.
  size_t arenaBytes() const { return arenaSize; }
  /// Planned programs: the host arena's size (Program::hostArenaBytes).
  size_t hostArenaBytes() const { return hostArenaSize; }
  /// The measured peak of the arena: the highest end (address - arena base
  /// + bytes) of any buffer handed out since construction, i.e. of every
  /// operand of every instruction the backend executed. 0 without a plan.
  size_t arenaHighWater() const { return highWater; }

private:
  void noteUse(int buffer);
  std::vector<std::unique_ptr<char[], void (*)(char *)>> owned;
  /// A planned program's arenas: anonymous mappings, zero pages until
  /// touched (a device backend's driver touches few of the arena's).
  std::vector<std::pair<char *, size_t>> mappings;
  std::vector<void *> ptrs;
  std::vector<size_t> sizes;
  std::vector<bool> host; ///< per buffer: Buffer::host
  std::vector<int64_t> nvmeOffset; ///< per buffer: in the swap file, or -1
  std::unique_ptr<SwapFile> swap;  ///< with NVMe-resident buffers
  char *arena = nullptr;
  size_t arenaSize = 0, hostArenaSize = 0, highWater = 0;
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
  /// Sets up what running `program` needs from the job's other ranks (the
  /// groups of its mesh): collective, every rank calls it before its first
  /// run. Without it the first run does it, which suffices only when every
  /// rank's first run comes at the same point (not so for pipeline stages,
  /// whose first runs wait for each other's activations).
  virtual void prepare(const Program &program) { (void)program; }
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
  /// comms_logger: the backend records each collective it runs in `log`
  /// (null: none). Returns false when it cannot time its collectives (the
  /// CUDA backend's run on streams).
  virtual bool setCommsLog(CommsLog *log) {
    (void)log;
    return false;
  }
};

/// OpenBLAS for GEMMs, OpenMP elsewhere.
std::unique_ptr<Backend> createCpuBackend(Communicator &comm);

/// Runs one instruction with the CPU backend's kernels over `storage`:
/// what another backend does with an instruction placed on the host
/// (Instr::host, ZeRO-Offload's updates and swaps). Not a collective.
/// The first call on a thread sets it up as the CPU backend sets up its
/// own (subnormals flushed to zero in it and its OpenMP threads, which
/// take their share of the node's cores among `localRanks` ranks).
/// Throws Error as the CPU backend would.
void runOnHost(const Program &program, Storage &storage, const Instr &instr,
               const RngContext &rng, int localRanks);

/// Fills every Param buffer per its init rule from a seeded Philox stream
/// (normal via Box-Muller), zeroes every other persistent buffer. A ZeRO
/// shard (Buffer::wholeShape) or tensor slice (Buffer::sliceDim) gets world
/// rank `rank`'s part (by its data and tensor coordinates in the program's
/// mesh) of the values its whole tensor would get, so every mesh starts
/// from the same weights.
/// With `only`, just the buffers it lists (their values do not depend on
/// the others: LoRA adapters missing from a base model's file).
void initializeParameters(const Program &program, Storage &storage,
                          uint64_t seed, int rank = 0,
                          const std::vector<int> *only = nullptr);

} // namespace dsc::rt

#endif // DSC_RUNTIME_RUNTIME_H
