//===- DeviceCollectives.cpp - Collectives on a device backend's memory ---===//
//
// The instruction-to-operation mapping a device backend shares with the
// CPU backend (CpuBackend::runCollective), and the host-staged group.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/DeviceCollectives.h"

#include "dsc/Program/ExpertExchange.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::rt {

CollectiveKind trafficKind(const DeviceCollective &c) {
  if (c.group == 1)
    return CollectiveKind::Count;
  switch (c.op) {
  case Opcode::AllReduce:
  case Opcode::TpReduce:
  case Opcode::NormAllReduce:
    return CollectiveKind::AllReduce;
  case Opcode::ReduceScatter:
    return CollectiveKind::ReduceScatter;
  case Opcode::AllGather:
    return CollectiveKind::AllGather;
  case Opcode::AllToAll:
    return CollectiveKind::AllToAll;
  case Opcode::Broadcast:
    return CollectiveKind::Broadcast;
  case Opcode::Send:
    return CollectiveKind::Send;
  case Opcode::MoeExchangeCounts:
    return CollectiveKind::AllToAll;
  default: // dsc.moe_exchange's bytes depend on the routing: counted as run
    return CollectiveKind::Count;
  }
}

int64_t sentBytes(const DeviceCollective &c, int64_t groupRank) {
  const int64_t bytes = c.count * int64_t(c.elementBytes), N = c.group;
  switch (trafficKind(c)) {
  case CollectiveKind::AllReduce:
    return 2 * bytes * (N - 1) / N;
  case CollectiveKind::ReduceScatter: // `count` is one rank's part
    return bytes * (N - 1);
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    return bytes * (N - 1);
  case CollectiveKind::Broadcast:
    return groupRank == c.peer ? bytes * (N - 1) : 0;
  case CollectiveKind::Send:
    return bytes;
  default:
    return 0;
  }
}

void runDeviceCollective(DeviceGroup &g, DeviceCopies &copies,
                         const DeviceCollective &c, const void *src, void *dst,
                         void *stream) {
  const int64_t bytes = c.count * int64_t(c.elementBytes);
  const int rank = g.rank(), size = g.size();
  // Send / Recv: the rank `peer` steps along the axis, wrapping around.
  const int peer = int(((rank + c.peer) % size + size) % size);
  switch (c.op) {
  case Opcode::AllReduce:
  case Opcode::TpReduce:
    return g.allReduce(src, dst, c.count, c.reduce, stream);
  case Opcode::ReduceScatter:
    return g.reduceScatter(src, dst, c.count, c.reduce, stream);
  case Opcode::AllGather:
    return g.allGather(src, dst, bytes, stream);
  case Opcode::AllToAll:
    return g.allToAll(src, dst, bytes, stream);
  case Opcode::Broadcast:
    if (src != dst)
      copies.within(dst, src, size_t(bytes), stream);
    return g.broadcast(dst, bytes, int(c.peer), stream);
  case Opcode::Send:
    return g.send(src, bytes, peer, stream);
  case Opcode::Recv:
    return g.recv(dst, bytes, peer, stream);
  case Opcode::Shard: // this rank's part: no communication
    return copies.within(dst, static_cast<const char *>(src) + rank * bytes,
                         size_t(bytes), stream);
  case Opcode::NormAllReduce:
    return g.normAllReduce(src, dst, stream);
  default:
    throw Error(std::string(opcodeName(c.op)) +
                ": not a collective a device group runs");
  }
}

namespace {

/// Device buffers through host memory: copy in, the host communicator's
/// collective, copy out. The staging buffers grow to the largest
/// collective and stay.
class StagedGroup final : public DeviceGroup {
public:
  StagedGroup(Communicator &host, DeviceCopies &copies)
      : host(host), copies(copies) {}
  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  bool capturable() const override { return false; }
  bool countsTraffic() const override { return true; }

  void allReduce(const void *src, void *dst, int64_t floats, ReduceOp op,
                 void *stream) override {
    float *h = floatsIn(0, floats);
    copies.toHost(h, src, size_t(floats) * 4, stream);
    host.allReduce(h, floats, op);
    copies.toDevice(dst, h, size_t(floats) * 4, stream);
  }
  void reduceScatter(const void *src, void *dst, int64_t floatsPerRank,
                     ReduceOp op, void *stream) override {
    const int64_t whole = floatsPerRank * size();
    float *in = floatsIn(0, whole), *out = floatsIn(1, floatsPerRank);
    copies.toHost(in, src, size_t(whole) * 4, stream);
    host.reduceScatter(in, out, floatsPerRank, op);
    copies.toDevice(dst, out, size_t(floatsPerRank) * 4, stream);
  }
  void allGather(const void *src, void *dst, int64_t bytesPerRank,
                 void *stream) override {
    char *in = bytesIn(0, bytesPerRank), *out = bytesIn(1, bytesPerRank * size());
    copies.toHost(in, src, size_t(bytesPerRank), stream);
    host.allGather(in, out, bytesPerRank);
    copies.toDevice(dst, out, size_t(bytesPerRank * size()), stream);
  }
  void allToAll(const void *src, void *dst, int64_t bytesPerPeer,
                void *stream) override {
    const int64_t whole = bytesPerPeer * size();
    char *in = bytesIn(0, whole), *out = bytesIn(1, whole);
    copies.toHost(in, src, size_t(whole), stream);
    host.allToAll(in, out, bytesPerPeer);
    copies.toDevice(dst, out, size_t(whole), stream);
  }
  void broadcast(void *data, int64_t bytes, int root, void *stream) override {
    char *h = bytesIn(0, bytes);
    if (rank() == root)
      copies.toHost(h, data, size_t(bytes), stream);
    host.broadcast(h, bytes, root);
    if (rank() != root)
      copies.toDevice(data, h, size_t(bytes), stream);
  }
  void send(const void *src, int64_t bytes, int to, void *stream) override {
    char *h = bytesIn(0, bytes);
    copies.toHost(h, src, size_t(bytes), stream);
    host.send(h, bytes, to);
  }
  void recv(void *dst, int64_t bytes, int from, void *stream) override {
    char *h = bytesIn(0, bytes);
    host.recv(h, bytes, from);
    copies.toDevice(dst, h, size_t(bytes), stream);
  }
  void exchange(const std::vector<PeerMessage> &sends,
                const std::vector<PeerMessage> &receives,
                void *stream) override {
    // Each send from its own host copy, which must live until waitSends.
    std::vector<std::vector<char>> outbox(sends.size());
    int64_t sent = 0;
    for (size_t i = 0; i < sends.size(); ++i) {
      outbox[i].resize(size_t(sends[i].bytes));
      copies.toHost(outbox[i].data(), sends[i].data, size_t(sends[i].bytes),
                    stream);
      host.startSend(outbox[i].data(), sends[i].bytes, sends[i].peer);
      sent += sends[i].bytes;
    }
    for (const PeerMessage &m : receives) {
      char *h = bytesIn(0, m.bytes);
      host.recv(h, m.bytes, m.peer);
      copies.toDevice(m.data, h, size_t(m.bytes), stream);
    }
    host.waitSends();
    host.countSent(CollectiveKind::Send, -sent);
    host.countSent(CollectiveKind::AllToAll, sent);
  }
  void normAllReduce(const void *norm, void *result, void *stream) override {
    float value = 0.0f;
    copies.toHost(&value, norm, sizeof value, stream);
    float sumSquares = value * value; // as CpuBackend: the same rounding
    host.allReduce(&sumSquares, 1, ReduceOp::Sum);
    value = std::sqrt(sumSquares);
    copies.toDevice(result, &value, sizeof value, stream);
  }

private:
  char *bytesIn(int which, int64_t bytes) {
    std::vector<char> &b = staging[which];
    if (b.size() < size_t(bytes))
      b.resize(size_t(bytes));
    return b.data();
  }
  float *floatsIn(int which, int64_t floats) {
    return reinterpret_cast<float *>(bytesIn(which, floats * 4));
  }

  Communicator &host;
  DeviceCopies &copies;
  /// Input and output staging. std::vector<char> is aligned for float
  /// (operator new's alignment).
  std::vector<char> staging[2];
};

} // namespace

int64_t runDeviceExpertExchange(DeviceGroup &g, DeviceCopies &copies,
                                const DeviceCollective &c,
                                const std::vector<void *> &operands,
                                void *stream) {
  const int64_t G = g.size(), me = g.rank(), El = c.experts / G;
  if (G != c.group)
    throw Error(c.describe() + ": the device group has " + std::to_string(G) +
                " ranks");
  if (c.op == Opcode::MoeExchangeCounts) {
    // Peer p gets our counts of its El experts: an all-to-all; the sums
    // over the sources on the host.
    if (operands.size() != 3)
      throw Error(c.describe() + ": expected counts, recv_counts, local_counts");
    g.allToAll(operands[0], operands[1], El * int64_t(sizeof(int32_t)),
               stream);
    std::vector<int32_t> received(size_t(G * El));
    std::vector<int32_t> local(static_cast<size_t>(El));
    copies.toHost(received.data(), operands[1], received.size() * 4, stream);
    sumOverSources(received.data(), G, El, local.data());
    copies.toDevice(operands[2], local.data(), local.size() * 4, stream);
    return El * int64_t(sizeof(int32_t)) * (G - 1);
  }
  if (c.op != Opcode::MoeExchange || operands.size() != 4)
    throw Error(c.describe() + ": not an expert exchange with input, counts, "
                "recv_counts and output");
  std::vector<int32_t> counts(size_t(c.experts)), recvCounts(size_t(G * El));
  copies.toHost(counts.data(), operands[1], counts.size() * 4, stream);
  copies.toHost(recvCounts.data(), operands[2], recvCounts.size() * 4, stream);
  ExpertExchangeLayout layout;
  try {
    layout = expertExchangeLayout(
        counts.data(), recvCounts.data(), c.experts, G,
        c.reverse ? c.outputRows : c.inputRows,
        c.reverse ? c.inputRows : c.outputRows);
  } catch (const Error &e) {
    throw Error(c.describe() + ": " + e.what());
  }
  // Forward: the sender layout's blocks of peer p's experts go to p, into
  // its receiver layout's blocks of this rank. Reverse: the other way.
  const int64_t B = c.rowBytes;
  auto *in = static_cast<char *>(operands[0]);
  auto *out = static_cast<char *>(operands[3]);
  auto fromBlocks = [&](int64_t peer) {
    return c.reverse ? layout.receiverBlocks(peer) : layout.senderBlocks(peer);
  };
  auto toBlocks = [&](int64_t peer) {
    return c.reverse ? layout.senderBlocks(peer) : layout.receiverBlocks(peer);
  };
  copies.zero(out, size_t(c.outputRows * B), stream);
  const auto ownFrom = fromBlocks(me), ownTo = toBlocks(me);
  for (size_t j = 0; j < ownFrom.size(); ++j)
    if (ownFrom[j].rows > 0)
      copies.within(out + ownTo[j].row * B, in + ownFrom[j].row * B,
                    size_t(ownFrom[j].rows * B), stream);
  std::vector<PeerMessage> sends, receives;
  int64_t sent = 0;
  for (int64_t k = 1; k < G; ++k) {
    const int64_t to = (me + k) % G, from = (me - k + G) % G;
    for (const auto &b : fromBlocks(to))
      if (b.rows > 0) {
        sends.push_back({in + b.row * B, b.rows * B, int(to)});
        sent += b.rows * B;
      }
    for (const auto &b : toBlocks(from))
      if (b.rows > 0)
        receives.push_back({out + b.row * B, b.rows * B, int(from)});
  }
  g.exchange(sends, receives, stream);
  return sent;
}

std::unique_ptr<DeviceGroup> createStagedGroup(Communicator &host,
                                               DeviceCopies &copies) {
  return std::make_unique<StagedGroup>(host, copies);
}

} // namespace dsc::rt
