//===- TcpCommunicator.cpp - Collectives over TCP, torchrun-style ---------===//

#include "dsc/Runtime/TcpCommunicator.h"

#include "Launcher.h"
#include "TcpLinks.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dsc::rt {

namespace {

using namespace tcp;

/// A group of the job's ranks (the whole job, or one split from it).
class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(std::shared_ptr<Links> net, std::vector<int> members, int me,
                  uint64_t context)
      : net(std::move(net)), members(std::move(members)), me(me),
        context(context) {
    this->net->contexts.push_back(context);
  }
  ~TcpCommunicator() override {
    if (!std::uncaught_exceptions())
      try {
        waitSends();
      } catch (const Error &) {
      }
  }
  int rank() const override { return me; }
  int size() const override { return int(members.size()); }
  int localRank() const override { return net->localRank; }
  int localSize() const override { return net->localSize; }
  const char *transport() const override { return "TCP"; }

  void allReduce(float *data, int64_t n, ReduceOp op) override {
    if (n < 0)
      throw Error("all_reduce: negative element count");
    const int N = size();
    // Chunk c of the ring: elements [n c / N, n (c + 1) / N).
    auto begin = [&](int c) { return n * c / N; };
    ringReduce(data, begin, (me + 1) % N, op, "all_reduce");
    ringGather(reinterpret_cast<char *>(data), sizeof(float), begin,
               (me + 1) % N, "all_reduce");
    finishMean(op, data, n);
    (*sent)[CollectiveKind::AllReduce] +=
        2 * n * int64_t(sizeof(float)) * (N - 1) / N;
  }

  void reduceScatter(const float *in, float *out, int64_t nPerRank,
                     ReduceOp op) override {
    if (nPerRank < 0)
      throw Error("reduce_scatter: negative element count");
    const int N = size();
    std::vector<float> work(in, in + nPerRank * N);
    ringReduce(
        work.data(), [&](int c) { return c * nPerRank; }, me, op,
        "reduce_scatter");
    std::copy_n(work.data() + me * nPerRank, nPerRank, out);
    finishMean(op, out, nPerRank);
    (*sent)[CollectiveKind::ReduceScatter] +=
        nPerRank * int64_t(sizeof(float)) * (N - 1);
  }

  void allGather(const void *in, void *out, int64_t bytesPerRank) override {
    gatherSlots(in, out, bytesPerRank, "all_gather");
    (*sent)[CollectiveKind::AllGather] += bytesPerRank * (size() - 1);
  }

  void allToAll(const void *in, void *out, int64_t bytesPerPeer) override {
    if (bytesPerPeer < 0)
      throw Error("all_to_all: negative byte count");
    const char *src = static_cast<const char *>(in);
    char *dst = static_cast<char *>(out);
    for (int p = 0; p < size(); ++p)
      if (p != me)
        postTo(p, kCollectiveTag, src + p * bytesPerPeer, size_t(bytesPerPeer));
    std::memcpy(dst + me * bytesPerPeer, src + me * bytesPerPeer,
                size_t(bytesPerPeer));
    for (int p = 0; p < size(); ++p)
      if (p != me)
        takeFrom(p, kCollectiveTag, dst + p * bytesPerPeer,
                 size_t(bytesPerPeer), "all_to_all");
    (*sent)[CollectiveKind::AllToAll] += bytesPerPeer * (size() - 1);
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    if (root < 0 || root >= size())
      throw Error("broadcast: root " + std::to_string(root) +
                  " is not a rank of a group of " + std::to_string(size()));
    if (bytes < 0)
      throw Error("broadcast: negative byte count");
    if (me != root) {
      takeFrom(root, kCollectiveTag, data, size_t(bytes), "broadcast");
      return;
    }
    for (int p = 0; p < size(); ++p)
      if (p != me)
        postTo(p, kCollectiveTag, data, size_t(bytes));
    (*sent)[CollectiveKind::Broadcast] += bytes * (size() - 1);
  }

  // A frame is a copy: `data` may change as soon as a send returns, and
  // only startSend's frames are waited for (waitSends).
  void send(const void *data, int64_t bytes, int to, int tag) override {
    postSend(data, bytes, to, tag);
  }
  void startSend(const void *data, int64_t bytes, int to, int tag) override {
    pending.push_back({members[size_t(to)], postSend(data, bytes, to, tag)});
  }
  void waitSends() override {
    const auto deadline = deadlineAfter(net->timeoutSeconds);
    for (const auto &[peer, number] : pending)
      net->links[size_t(peer)]->waitWritten(number, deadline);
    pending.clear();
  }
  void recv(void *data, int64_t bytes, int from, int tag) override {
    checkPeer("recv", from, tag, bytes);
    takeFrom(from, uint32_t(tag), data, size_t(bytes), "recv");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    const int N = size();
    const int32_t mine[2] = {color, key};
    std::vector<int32_t> all(static_cast<size_t>(2 * N));
    gatherSlots(mine, all.data(), sizeof mine, "split");
    std::vector<std::pair<int32_t, int>> chosen; // (key, group rank)
    for (int r = 0; r < N; ++r)
      if (all[size_t(2 * r)] == color)
        chosen.push_back({all[size_t(2 * r + 1)], r});
    std::sort(chosen.begin(), chosen.end());
    std::vector<int> group;
    int index = 0;
    for (const auto &[k, r] : chosen) {
      if (r == me)
        index = int(group.size());
      group.push_back(members[size_t(r)]);
    }
    // Every member derives the same context: this one's, the split's
    // number and the color, mixed (FNV-1a).
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {context, ++splits, uint64_t(uint32_t(color))})
      for (int b = 0; b < 8; ++b)
        h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
    auto child =
        std::make_unique<TcpCommunicator>(net, std::move(group), index, h);
    child->sent = sent;
    return child;
  }

  void barrier() override {
    // Ranks wait here for rank 0's writes (a checkpoint can take a while).
    constexpr double kPatience = 10;
    char token = 0;
    if (me != 0) {
      postTo(0, kBarrierTag, &token, 1);
      takeFrom(0, kBarrierTag, &token, 1, "barrier", kPatience);
      return;
    }
    for (int p = 1; p < size(); ++p)
      takeFrom(p, kBarrierTag, &token, 1, "barrier", kPatience);
    for (int p = 1; p < size(); ++p)
      postTo(p, kBarrierTag, &token, 1);
  }

private:
  int next() const { return (me + 1) % size(); }
  int prev() const { return (me - 1 + size()) % size(); }
  void postTo(int groupRank, uint32_t tag, const void *data, size_t bytes) {
    const int peer = members[size_t(groupRank)];
    net->links[size_t(peer)]->post(context, tag, data, bytes);
  }
  void takeFrom(int groupRank, uint32_t tag, void *data, size_t bytes,
                const char *what, double patience = 1) {
    net->take(members[size_t(groupRank)], context, tag, data, bytes, what,
              patience);
  }
  /// A user's send to group rank `to`, checked and counted: the frame's
  /// number on the link to it.
  uint64_t postSend(const void *data, int64_t bytes, int to, int tag) {
    checkPeer("send", to, tag, bytes);
    const uint64_t number = net->links[size_t(members[size_t(to)])]->post(
        context, uint32_t(tag), data, size_t(bytes));
    (*sent)[CollectiveKind::Send] += bytes;
    return number;
  }
  void checkPeer(const char *what, int peer, int tag, int64_t bytes) const {
    if (peer < 0 || peer >= size() || peer == me)
      throw Error(std::string(what) + ": rank " + std::to_string(peer) +
                  " is not another rank of a group of " +
                  std::to_string(size()));
    if (tag < 0 || uint32_t(tag) > kMaxUserTag)
      throw Error(std::string(what) + ": tag " + std::to_string(tag) +
                  " is outside 0.." + std::to_string(kMaxUserTag));
    if (bytes < 0)
      throw Error(std::string(what) + ": negative byte count");
  }
  /// The rings run over N chunks of a buffer, chunk c holding elements
  /// [begin(c), begin(c + 1)). A reduce-scatter: each of N - 1 steps sends
  /// a chunk to the next rank and adds the previous rank's into another,
  /// so that this rank ends holding chunk `owned` reduced over every rank.
  template <typename Begin>
  void ringReduce(float *data, Begin begin, int owned, ReduceOp op,
                  const char *what) {
    const int N = size();
    if (N == 1)
      return;
    auto count = [&](int c) { return begin(c + 1) - begin(c); };
    int64_t largest = 0;
    for (int c = 0; c < N; ++c)
      largest = std::max(largest, count(c));
    std::vector<float> incoming(static_cast<size_t>(largest));
    for (int k = 0; k < N - 1; ++k) {
      const int out = (owned - 1 - k + 2 * N) % N,
                in = (owned - 2 - k + 2 * N) % N;
      postTo(next(), kCollectiveTag, data + begin(out), size_t(count(out)) * 4);
      takeFrom(prev(), kCollectiveTag, incoming.data(), size_t(count(in)) * 4,
               what);
      combine(data + begin(in), incoming.data(), count(in), op);
    }
  }
  /// An all-gather over the same chunks (of `unit` bytes per element),
  /// this rank holding chunk `owned`: after N - 1 steps it holds them all.
  template <typename Begin>
  void ringGather(char *base, size_t unit, Begin begin, int owned,
                  const char *what) {
    const int N = size();
    for (int k = 0; k < N - 1; ++k) {
      const int out = (owned - k + N) % N, in = (owned - k - 1 + N) % N;
      postTo(next(), kCollectiveTag, base + begin(out) * unit,
             size_t(begin(out + 1) - begin(out)) * unit);
      takeFrom(prev(), kCollectiveTag, base + begin(in) * unit,
               size_t(begin(in + 1) - begin(in)) * unit, what);
    }
  }
  /// Every rank's `bytes` bytes of `in`, in rank order, into `out`.
  void gatherSlots(const void *in, void *out, int64_t bytes, const char *what) {
    if (bytes < 0)
      throw Error(std::string(what) + ": negative byte count");
    char *slots = static_cast<char *>(out);
    std::memcpy(slots + me * bytes, in, size_t(bytes));
    ringGather(
        slots, 1, [&](int c) { return c * bytes; }, me, what);
  }
  static void combine(float *acc, const float *add, int64_t n, ReduceOp op) {
    if (op == ReduceOp::Max)
      for (int64_t i = 0; i < n; ++i)
        acc[i] = std::max(acc[i], add[i]);
    else
      for (int64_t i = 0; i < n; ++i)
        acc[i] += add[i];
  }
  void finishMean(ReduceOp op, float *data, int64_t n) const {
    if (op != ReduceOp::Mean)
      return;
    const float inv = 1.0f / float(size());
    for (int64_t i = 0; i < n; ++i)
      data[i] *= inv;
  }

  std::shared_ptr<Links> net;
  std::vector<int> members; ///< job ranks, by group rank
  int me;
  uint64_t context;
  uint64_t splits = 0;
  std::vector<std::pair<int, uint64_t>> pending; ///< startSend's frames
};

std::string requiredVariable(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    throw Error(std::string("WORLD_SIZE asks for several ranks and no MPI "
                            "launcher started this process, so they meet "
                            "over TCP: set ") +
                name + " (torchrun sets MASTER_ADDR, MASTER_PORT and RANK)");
  return v;
}

} // namespace

TcpJob tcpJobFromEnvironment(bool connecting) {
  TcpJob job;
  job.worldSize = int(envInteger("WORLD_SIZE", 1, 1, 1 << 20));
  if (const char *rank = std::getenv("RANK");
      rank && !std::getenv("WORLD_SIZE"))
    throw Error(std::string("environment variable RANK='") + rank +
                "' is set but WORLD_SIZE is missing (a launcher that sets "
                "RANK sets WORLD_SIZE too)");
  if (connecting) {
    requiredVariable("MASTER_ADDR");
    requiredVariable("MASTER_PORT");
    requiredVariable("RANK");
  }
  if (const char *addr = std::getenv("MASTER_ADDR"))
    job.masterAddr = addr;
  job.masterPort = int(envInteger("MASTER_PORT", 0, 1, 65535));
  job.rank = int(envInteger("RANK", 0, 0, job.worldSize - 1));
  job.localSize = int(envInteger("LOCAL_WORLD_SIZE", -1, 1, job.worldSize));
  job.localRank =
      int(envInteger("LOCAL_RANK", -1, 0,
                     (job.localSize > 0 ? job.localSize : job.worldSize) - 1));
  job.timeoutSeconds = collectiveTimeoutSeconds();
  return job;
}

std::unique_ptr<Communicator> createTcpCommunicator(const TcpJob &job) {
  std::shared_ptr<Links> net = connectJob(job);
  std::vector<int> everyone(static_cast<size_t>(job.worldSize));
  for (int r = 0; r < job.worldSize; ++r)
    everyone[size_t(r)] = r;
  return std::make_unique<TcpCommunicator>(net, std::move(everyone), job.rank,
                                           /*context=*/1);
}

} // namespace dsc::rt
