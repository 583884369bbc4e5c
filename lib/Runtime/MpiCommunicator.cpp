//===- MpiCommunicator.cpp - Collectives over MPI -------------------------===//
//
// CPU ranks talk through the MPI library the launcher belongs to (Debian's
// Open MPI here). Every collective is issued non-blocking and waited for
// with a deadline, so a rank that stops (or a network that drops) makes the
// others stop with one line instead of hanging for ever.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace dsc::rt {

namespace {

/// The MPI library's message for an error code.
std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, size_t(length));
}

/// Whether MPI was initialised for calls from more than one thread (one at a
/// time): MPI_THREAD_SERIALIZED or better.
bool mpiSerialized = false;

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const LaunchEnvironment &env);
  /// A group split from `parent` (takes `comm`; shares the parent's
  /// traffic count and node placement).
  MpiCommunicator(const MpiCommunicator &parent, MPI_Comm comm);
  ~MpiCommunicator() override;
  int rank() const override { return myRank; }
  int size() const override { return worldSize; }
  int localRank() const override { return myLocalRank; }
  int localSize() const override { return myLocalSize; }
  bool callableFromAnotherThread() const override { return mpiSerialized; }
  const char *transport() const override { return "MPI"; }
  void allReduce(float *data, int64_t n, ReduceOp op) override;
  void reduceScatter(const float *in, float *out, int64_t nPerRank,
                     ReduceOp op) override;
  void allGather(const void *in, void *out, int64_t bytesPerRank) override;
  void allToAll(const void *in, void *out, int64_t bytesPerPeer) override;
  void broadcast(void *data, int64_t bytes, int root) override;
  void send(const void *data, int64_t bytes, int to, int tag) override;
  void recv(void *data, int64_t bytes, int from, int tag) override;
  void startSend(const void *data, int64_t bytes, int to, int tag) override;
  void waitSends() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  void barrier() override;

private:
  void check(int code, const char *what) const;
  /// MPI sums; a mean divides the sum by the world size afterwards.
  void finishMean(ReduceOp op, float *data, int64_t n) const {
    if (op != ReduceOp::Mean)
      return;
    const float inv = 1.0f / float(worldSize);
    for (int64_t i = 0; i < n; ++i)
      data[i] *= inv;
  }
  /// Waits for `request` until `patience` times the deadline; past it,
  /// names the ranks that did not report and aborts the job.
  void wait(MPI_Request &request, const char *what, double patience = 1);
  [[noreturn]] void declareLost(const char *what, double waitedSeconds);
  /// MPI counts are ints: splits `n` items into chunks MPI can take.
  static constexpr int64_t kMaxCount = int64_t(1) << 30;
  /// A count of one call (`what`: "all_gather", `unit`: "bytes per rank")
  /// that MPI can take, or an error.
  static int countOf(const char *what, int64_t n, const char *unit) {
    if (n < 0 || n > kMaxCount)
      throw Error(std::string(what) + ": " + std::to_string(n) + " " + unit +
                  " is outside [0, 2^30]");
    return int(n);
  }

  /// The signature MPI_Iallgather and MPI_Ialltoall share.
  using ByteExchange = int (*)(const void *, int, MPI_Datatype, void *, int,
                               MPI_Datatype, MPI_Comm, MPI_Request *);
  /// One all-gather or all-to-all of `bytes` per rank (`unit` names them
  /// in the count error), counted as sent to every other rank.
  void exchangeBytes(ByteExchange exchange, const char *mpiName,
                     CollectiveKind kind, const char *what, const char *unit,
                     const void *in, void *out, int64_t bytes);

  /// Moves `bytes` bytes in chunks of at most kMaxCount (MPI counts are
  /// ints): `start(offset, count, request)` issues one non-blocking call
  /// per chunk, each waited for with the deadline.
  template <typename Start>
  void inChunks(const char *what, int64_t bytes, Start start);
  /// A peer's group rank, checked.
  int peerRank(const char *what, int peer) const;
  /// MPI promises tags up to 32767 (MPI_TAG_UB at least).
  static void checkTag(const char *what, int tag) {
    if (tag < 0 || tag > 32767)
      throw Error(std::string(what) + ": tag " + std::to_string(tag) +
                  " is outside 0..32767");
  }
  /// Starts sending `bytes` bytes to `to` in chunks MPI can count, one
  /// request per chunk appended to `requests` (send and startSend).
  void issueSend(const void *data, int64_t bytes, int to, int tag,
                 std::vector<MPI_Request> &requests);

  MPI_Comm world = MPI_COMM_NULL; ///< the collectives' communicator (the
                                  ///< group's, for a split one)
  MPI_Comm alarm = MPI_COMM_NULL; ///< "I timed out" messages
  /// Named `world` for the job's communicator; a split one's members are
  /// ranks 0..worldSize-1 of the group, jobRank[r] in the job.
  int myRank = 0, worldSize = 1, myLocalRank = 0, myLocalSize = 1;
  std::vector<int> jobRank;
  bool ownsMpi = false; ///< the job's communicator finalizes MPI
  std::vector<MPI_Request> pendingSends; ///< startSend's, in order
  double timeoutSeconds = 45;
};

MpiCommunicator::MpiCommunicator(const LaunchEnvironment &env) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // overlap_comm calls MPI from a communication thread, never from two
  // threads at once: MPI_THREAD_SERIALIZED.
  int provided = MPI_THREAD_SINGLE;
  if (!initialized &&
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
          MPI_SUCCESS)
    throw Error("MPI_Init failed (launched by " + env.mpiLauncher + ")");
  if (initialized)
    MPI_Query_thread(&provided);
  mpiSerialized = provided >= MPI_THREAD_SERIALIZED;
  // Errors come back as codes and become one-line errors here.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &alarm), "MPI_Comm_dup");
  MPI_Comm_rank(world, &myRank);
  MPI_Comm_size(world, &worldSize);
  if (worldSize != env.worldSize)
    throw Error(env.mpiLauncher + " started " + std::to_string(env.worldSize) +
                " ranks (" + env.worldSizeVariable + "), but MPI sees " +
                std::to_string(worldSize) +
                " (an MPI library that does not match the launcher? with "
                "srun, try --mpi=pmix)");
  MPI_Comm node;
  check(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, myRank,
                            MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  MPI_Comm_rank(node, &myLocalRank);
  MPI_Comm_size(node, &myLocalSize);
  MPI_Comm_free(&node);
  timeoutSeconds = collectiveTimeoutSeconds();
  for (int r = 0; r < worldSize; ++r)
    jobRank.push_back(r);
  ownsMpi = true;
}

MpiCommunicator::MpiCommunicator(const MpiCommunicator &parent, MPI_Comm comm)
    : world(comm), myLocalRank(parent.myLocalRank),
      myLocalSize(parent.myLocalSize), timeoutSeconds(parent.timeoutSeconds) {
  sent = parent.sent;
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(world, &alarm), "MPI_Comm_dup");
  MPI_Comm_rank(world, &myRank);
  MPI_Comm_size(world, &worldSize);
  // The job's rank of each member: gathered, as MPI_Group_translate_ranks
  // would need the job's group.
  const int mine = parent.jobRank[size_t(parent.myRank)];
  jobRank.assign(size_t(worldSize), 0);
  MPI_Request request;
  check(MPI_Iallgather(&mine, 1, MPI_INT, jobRank.data(), 1, MPI_INT, world,
                       &request),
        "MPI_Iallgather");
  wait(request, "split");
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  // MPI_Comm_split blocks without a deadline: meet in a barrier that has
  // one first, so a lost rank is named instead of hanging the others.
  MPI_Request arrived;
  check(MPI_Ibarrier(world, &arrived), "MPI_Ibarrier");
  wait(arrived, "split");
  MPI_Comm group = MPI_COMM_NULL;
  check(MPI_Comm_split(world, color, key, &group), "MPI_Comm_split");
  return std::make_unique<MpiCommunicator>(*this, group);
}

MpiCommunicator::~MpiCommunicator() {
  // A rank that fails alone exits without MPI_Finalize (which would wait
  // for the others); the launcher then ends the job.
  if (std::uncaught_exceptions())
    return;
  MPI_Comm_free(&alarm);
  MPI_Comm_free(&world);
  if (ownsMpi)
    MPI_Finalize();
}

void MpiCommunicator::check(int code, const char *what) const {
  if (code != MPI_SUCCESS)
    throw Error(std::string(what) + " failed on rank " +
                std::to_string(myRank) + ": " + mpiErrorString(code));
}

void MpiCommunicator::wait(MPI_Request &request, const char *what,
                           double patience) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Spin briefly (small collectives finish in microseconds), then back off
  // so that oversubscribed ranks leave the cores to the ranks still working.
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done)
      return;
    const double waited =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (timeoutSeconds > 0 && waited > timeoutSeconds * patience)
      declareLost(what, timeoutSeconds * patience);
    if (pause.count())
      std::this_thread::sleep_for(pause);
    if (waited > 1e-3)
      pause = std::min(std::chrono::microseconds(2000),
                       pause + std::chrono::microseconds(20));
  }
}

void MpiCommunicator::declareLost(const char *what, double waitedSeconds) {
  // Every live rank is stuck in the same collective and times out too;
  // each tells the others so. Whoever is not heard from within a few
  // seconds is the rank that stopped or died.
  constexpr int kTag = 7;
  std::vector<MPI_Request> sends;
  for (int r = 0; r < worldSize; ++r) {
    if (r == myRank)
      continue;
    sends.emplace_back();
    MPI_Issend(&myRank, 1, MPI_INT, r, kTag, alarm, &sends.back());
  }
  std::vector<bool> heard(size_t(worldSize), false);
  heard[size_t(myRank)] = true;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTag, alarm, &flag, &status);
    if (flag) {
      int from = 0;
      MPI_Recv(&from, 1, MPI_INT, status.MPI_SOURCE, kTag, alarm,
               MPI_STATUS_IGNORE);
      heard[size_t(status.MPI_SOURCE)] = true;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string lost;
  for (int r = 0; r < worldSize; ++r)
    if (!heard[size_t(r)])
      lost += (lost.empty() ? "" : ", ") + std::to_string(jobRank[size_t(r)]);
  std::fprintf(stderr,
               "rank %d: error: %s did not complete in %.0f s; %s "
               "(DSC_COMM_TIMEOUT sets the limit)\n",
               jobRank[size_t(myRank)], what, waitedSeconds,
               lost.empty() ? "every rank is waiting (a rank fell behind?)"
                            : ("lost rank " + lost + " (stopped or died)").c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void MpiCommunicator::allReduce(float *data, int64_t n, ReduceOp op) {
  if (n < 0)
    throw Error("all_reduce: negative element count");
  for (int64_t done = 0; done < n; done += kMaxCount) {
    const int count = int(std::min(kMaxCount, n - done));
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data + done, count, MPI_FLOAT,
                         op == ReduceOp::Max ? MPI_MAX : MPI_SUM, world,
                         &request),
          "MPI_Iallreduce");
    wait(request, "all_reduce");
  }
  finishMean(op, data, n);
  (*sent)[CollectiveKind::AllReduce] +=
      2 * n * int64_t(sizeof(float)) * (worldSize - 1) / worldSize;
}

void MpiCommunicator::reduceScatter(const float *in, float *out,
                                    int64_t nPerRank, ReduceOp op) {
  const int count = countOf("reduce_scatter", nPerRank, "elements per rank");
  MPI_Request request;
  check(MPI_Ireduce_scatter_block(in, out, count, MPI_FLOAT,
                                  op == ReduceOp::Max ? MPI_MAX : MPI_SUM,
                                  world, &request),
        "MPI_Ireduce_scatter_block");
  wait(request, "reduce_scatter");
  finishMean(op, out, nPerRank);
  (*sent)[CollectiveKind::ReduceScatter] +=
      nPerRank * int64_t(sizeof(float)) * (worldSize - 1);
}

void MpiCommunicator::exchangeBytes(ByteExchange exchange,
                                    const char *mpiName, CollectiveKind kind,
                                    const char *what, const char *unit,
                                    const void *in, void *out, int64_t bytes) {
  const int count = countOf(what, bytes, unit);
  MPI_Request request;
  check(exchange(in, count, MPI_BYTE, out, count, MPI_BYTE, world, &request),
        mpiName);
  wait(request, what);
  (*sent)[kind] += bytes * (worldSize - 1);
}

void MpiCommunicator::allGather(const void *in, void *out,
                                int64_t bytesPerRank) {
  exchangeBytes(MPI_Iallgather, "MPI_Iallgather", CollectiveKind::AllGather,
                "all_gather", "bytes per rank", in, out, bytesPerRank);
}

void MpiCommunicator::allToAll(const void *in, void *out,
                               int64_t bytesPerPeer) {
  exchangeBytes(MPI_Ialltoall, "MPI_Ialltoall", CollectiveKind::AllToAll,
                "all_to_all", "bytes per peer", in, out, bytesPerPeer);
}

template <typename Start>
void MpiCommunicator::inChunks(const char *what, int64_t bytes, Start start) {
  if (bytes < 0)
    throw Error(std::string(what) + ": negative byte count");
  for (int64_t done = 0; done < bytes; done += kMaxCount) {
    MPI_Request request;
    start(done, int(std::min(kMaxCount, bytes - done)), &request);
    wait(request, what);
  }
}

int MpiCommunicator::peerRank(const char *what, int peer) const {
  if (peer < 0 || peer >= worldSize || peer == myRank)
    throw Error(std::string(what) + ": rank " + std::to_string(peer) +
                " is not another rank of a group of " +
                std::to_string(worldSize));
  return peer;
}

void MpiCommunicator::broadcast(void *data, int64_t bytes, int root) {
  if (root < 0 || root >= worldSize)
    throw Error("broadcast: root " + std::to_string(root) +
                " is not a rank of a group of " + std::to_string(worldSize));
  char *base = static_cast<char *>(data);
  inChunks("broadcast", bytes, [&](int64_t at, int count, MPI_Request *r) {
    check(MPI_Ibcast(base + at, count, MPI_BYTE, root, world, r),
          "MPI_Ibcast");
  });
  if (myRank == root)
    (*sent)[CollectiveKind::Broadcast] += bytes * (worldSize - 1);
}

void MpiCommunicator::send(const void *data, int64_t bytes, int to,
                           int tag) {
  std::vector<MPI_Request> requests;
  issueSend(data, bytes, to, tag, requests);
  for (MPI_Request &request : requests)
    wait(request, "send");
}

void MpiCommunicator::issueSend(const void *data, int64_t bytes, int to,
                                int tag, std::vector<MPI_Request> &requests) {
  const int peer = peerRank("send", to);
  checkTag("send", tag);
  if (bytes < 0)
    throw Error("send: negative byte count");
  const char *base = static_cast<const char *>(data);
  for (int64_t at = 0; at < bytes; at += kMaxCount) {
    requests.emplace_back();
    check(MPI_Isend(base + at, int(std::min(kMaxCount, bytes - at)),
                    MPI_BYTE, peer, tag, world, &requests.back()),
          "MPI_Isend");
  }
  (*sent)[CollectiveKind::Send] += bytes;
}

void MpiCommunicator::startSend(const void *data, int64_t bytes, int to,
                                int tag) {
  issueSend(data, bytes, to, tag, pendingSends);
}

void MpiCommunicator::waitSends() {
  for (MPI_Request &request : pendingSends)
    wait(request, "send");
  pendingSends.clear();
}

void MpiCommunicator::recv(void *data, int64_t bytes, int from, int tag) {
  const int peer = peerRank("recv", from);
  checkTag("recv", tag);
  char *base = static_cast<char *>(data);
  inChunks("recv", bytes, [&](int64_t at, int count, MPI_Request *r) {
    check(MPI_Irecv(base + at, count, MPI_BYTE, peer, tag, world, r),
          "MPI_Irecv");
  });
}

void MpiCommunicator::barrier() {
  MPI_Request request;
  check(MPI_Ibarrier(world, &request), "MPI_Ibarrier");
  // Ranks wait here for rank 0's writes (a checkpoint can take a while).
  wait(request, "barrier", 10);
}

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(const LaunchEnvironment &env) {
  return std::make_unique<MpiCommunicator>(env);
}

} // namespace dsc::rt
