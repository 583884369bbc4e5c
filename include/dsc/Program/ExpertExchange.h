//===- ExpertExchange.h - Expert parallelism's row layout --------*- C++ -*-===//
//
// Where the rows of dsc.moe_exchange lie on both sides, from the counts
// (the compiler/runtime contract's meaning of the op, Dialect's
// description): the G ranks of the axis hold El = E / G experts each. The
// sender's layout is expert-major (expert x's rows from sendOffset[x]);
// the receiver's is by local expert, then by source rank. The CPU backend
// packs each peer's blocks into one message; a device backend sends one
// message per non-empty block, in local-expert order, which both sides
// know from the counts.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_EXPERTEXCHANGE_H
#define DSC_PROGRAM_EXPERTEXCHANGE_H

#include <cstdint>
#include <vector>

namespace dsc::rt {

struct ExpertExchangeLayout {
  int64_t G = 1, perRank = 1;
  /// Sender layout: expert x's rows start at sendOffset[x] (E + 1 entries).
  std::vector<int64_t> sendOffset;
  /// Receiver layout: local expert j's rows from source s start at
  /// recvOffset[j * G + s]; there are recvCounts[s * El + j] of them.
  std::vector<int64_t> recvOffset;
  std::vector<int32_t> recvCounts;

  /// One contiguous run of rows in this rank's own buffer.
  struct Block {
    int64_t row = 0, rows = 0;
  };
  /// The blocks of the sender layout that hold group rank p's experts'
  /// rows, expert by expert (empty ones included).
  std::vector<Block> senderBlocks(int64_t p) const;
  /// The blocks of the receiver layout that hold source s's rows, local
  /// expert by local expert (empty ones included).
  std::vector<Block> receiverBlocks(int64_t s) const;
  /// Rows this rank sends to group rank p in the forward direction.
  int64_t rowsTo(int64_t p) const;
  /// Rows this rank receives from group rank s in the forward direction.
  int64_t rowsFrom(int64_t s) const;
};

/// dsc.moe_exchange_counts' second result: `local[j]` (El of them) sums
/// `recvCounts[s, j]` over the G sources.
void sumOverSources(const int32_t *recvCounts, int64_t G, int64_t El,
                    int32_t *local);

/// The layout of one exchange over G ranks: `counts` [E] this rank's rows
/// per expert (within `senderRows`), `recvCounts` [G, El] what each source
/// has for this rank's experts (within `receiverRows`). Throws dsc::Error
/// naming a negative count or a bound the counts exceed.
ExpertExchangeLayout expertExchangeLayout(const int32_t *counts,
                                          const int32_t *recvCounts,
                                          int64_t experts, int64_t G,
                                          int64_t senderRows,
                                          int64_t receiverRows);

} // namespace dsc::rt

#endif // DSC_PROGRAM_EXPERTEXCHANGE_H
