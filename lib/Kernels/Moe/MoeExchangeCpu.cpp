//===- MoeExchangeCpu.cpp - Expert parallelism's exchanges ----------------===//
//
// dsc.moe_exchange_counts and dsc.moe_exchange on the CPU backend: the G
// ranks of the instruction's axis hold El = E / G experts each (expert e
// on group rank e / El). A rank's expert-major rows (dsc.moe_dispatch's
// layout) go to the ranks of their experts, which lay them out by local
// expert, then by source rank; `reverse` sends them back. One message per
// peer holds exactly the rows that peer needs: the counts, exchanged
// first, tell both sides the sizes, so nothing is padded on the wire.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include "dsc/Program/ExpertExchange.h"

#include <cstring>
#include <vector>

namespace dsc::rt::cpu {

namespace {

ExpertExchangeLayout layoutOf(Exec &e, int64_t G) {
  const bool reverse = e.I.getInt("reverse") != 0;
  try {
    return expertExchangeLayout(e.iin(1, "counts"), e.iin(2, "recv_counts"),
                                e.d.experts, G, reverse ? e.d.M : e.d.rows,
                                reverse ? e.d.rows : e.d.M);
  } catch (const Error &err) {
    e.fail(err.what());
  }
}

/// Forward: this rank's rows for peer p's experts are contiguous in the
/// sender layout; rows received from source s are scattered by expert.
/// Reverse: the rows of source s are gathered by expert and sent back; the
/// rows returned by peer p land contiguously in the sender layout.
void exchangeRows(Exec &e, Communicator &group, const ExpertExchangeLayout &r,
                  bool reverse) {
  const char *in = static_cast<const char *>(e.S.data(e.inId(0)));
  char *out = static_cast<char *>(e.S.data(e.outId(0)));
  const int64_t G = r.G, me = group.rank(),
                B = e.d.cols * int64_t(dtypeSize(e.in(0).dtype));
  std::memset(out, 0, e.out(0).bytes());
  // The rows of source s in the receiver layout, expert by expert, as one
  // contiguous message (or from one).
  auto pack = [&](int64_t s, const char *recvLayout, char *message) {
    for (const auto &b : r.receiverBlocks(s)) {
      std::memcpy(message, recvLayout + b.row * B, size_t(b.rows * B));
      message += b.rows * B;
    }
  };
  auto unpack = [&](int64_t s, const char *message, char *recvLayout) {
    for (const auto &b : r.receiverBlocks(s)) {
      std::memcpy(recvLayout + b.row * B, message, size_t(b.rows * B));
      message += b.rows * B;
    }
  };
  auto senderBlock = [&](int64_t p) {
    return r.sendOffset[size_t(p * r.perRank)] * B;
  };
  // This rank's own rows.
  if (!reverse)
    unpack(me, in + senderBlock(me), out);
  else
    pack(me, in, out + senderBlock(me));
  // Peer k steps ahead gets ours while we take the one k steps behind's.
  std::vector<std::vector<char>> outbox(static_cast<size_t>(G));
  int64_t sent = 0;
  for (int64_t k = 1; k < G; ++k) {
    const int64_t to = (me + k) % G, from = (me - k + G) % G;
    const int64_t sendBytes =
        (reverse ? r.rowsFrom(to) : r.rowsTo(to)) * B;
    const int64_t recvBytes =
        (reverse ? r.rowsTo(from) : r.rowsFrom(from)) * B;
    sent += sendBytes;
    if (sendBytes > 0) {
      if (!reverse) {
        group.startSend(in + senderBlock(to), sendBytes, int(to));
      } else {
        std::vector<char> &message = outbox[size_t(to)];
        message.resize(size_t(sendBytes));
        pack(to, in, message.data());
        group.startSend(message.data(), sendBytes, int(to));
      }
    }
    if (recvBytes > 0) {
      if (reverse) {
        group.recv(out + senderBlock(from), recvBytes, int(from));
      } else {
        std::vector<char> message(static_cast<size_t>(recvBytes));
        group.recv(message.data(), recvBytes, int(from));
        unpack(from, message.data(), out);
      }
    }
  }
  group.waitSends();
  // The messages form one all-to-all: its traffic is counted as one.
  group.countSent(CollectiveKind::Send, -sent);
  group.countSent(CollectiveKind::AllToAll, sent);
}

} // namespace

int64_t runExpertExchange(Exec &e, Communicator &group) {
  if (group.size() != e.d.group)
    e.fail("the communicator has " + std::to_string(group.size()) +
           " ranks, the program's axis " + std::to_string(e.d.group));
  const int64_t G = e.d.group;
  if (e.I.op == Opcode::MoeExchangeCounts) {
    // Peer p gets our counts of its El experts: an all-to-all.
    const int32_t *counts = e.iin(0, "counts");
    int32_t *recv = e.iout(0, "recv_counts"), *local = e.iout(1, "local_counts");
    group.allToAll(counts, recv, e.d.n * int64_t(sizeof(int32_t)));
    sumOverSources(recv, G, e.d.n, local);
    return G * e.d.n * int64_t(sizeof(int32_t));
  }
  const bool reverse = e.I.getInt("reverse") != 0;
  const ExpertExchangeLayout layout = layoutOf(e, G);
  exchangeRows(e, group, layout, reverse);
  // The rows this rank holds for the exchange, its own among them.
  int64_t rows = 0;
  for (int64_t p = 0; p < G; ++p)
    rows += reverse ? layout.rowsFrom(p) : layout.rowsTo(p);
  return rows * e.d.cols * int64_t(dtypeSize(e.in(0).dtype));
}

} // namespace dsc::rt::cpu
