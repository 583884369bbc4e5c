//===- ExpertExchange.cpp - Expert parallelism's row layout ---------------===//

#include "dsc/Program/ExpertExchange.h"

#include "dsc/Support/Error.h"

#include <string>

namespace dsc::rt {

std::vector<ExpertExchangeLayout::Block>
ExpertExchangeLayout::senderBlocks(int64_t p) const {
  std::vector<Block> blocks;
  for (int64_t x = p * perRank; x < (p + 1) * perRank; ++x)
    blocks.push_back({sendOffset[size_t(x)],
                      sendOffset[size_t(x) + 1] - sendOffset[size_t(x)]});
  return blocks;
}

std::vector<ExpertExchangeLayout::Block>
ExpertExchangeLayout::receiverBlocks(int64_t s) const {
  std::vector<Block> blocks;
  for (int64_t j = 0; j < perRank; ++j)
    blocks.push_back(
        {recvOffset[size_t(j * G + s)], recvCounts[size_t(s * perRank + j)]});
  return blocks;
}

int64_t ExpertExchangeLayout::rowsTo(int64_t p) const {
  return sendOffset[size_t((p + 1) * perRank)] -
         sendOffset[size_t(p * perRank)];
}

int64_t ExpertExchangeLayout::rowsFrom(int64_t s) const {
  int64_t rows = 0;
  for (int64_t j = 0; j < perRank; ++j)
    rows += recvCounts[size_t(s * perRank + j)];
  return rows;
}

void sumOverSources(const int32_t *recvCounts, int64_t G, int64_t El,
                    int32_t *local) {
  for (int64_t j = 0; j < El; ++j) {
    int64_t sum = 0;
    for (int64_t s = 0; s < G; ++s)
      sum += recvCounts[s * El + j];
    local[j] = int32_t(sum);
  }
}

ExpertExchangeLayout expertExchangeLayout(const int32_t *counts,
                                          const int32_t *recvCounts,
                                          int64_t experts, int64_t G,
                                          int64_t senderRows,
                                          int64_t receiverRows) {
  ExpertExchangeLayout r;
  r.G = G;
  r.perRank = experts / G;
  r.sendOffset.assign(size_t(experts) + 1, 0);
  for (int64_t x = 0; x < experts; ++x) {
    if (counts[x] < 0)
      throw Error("expert " + std::to_string(x) + " has a negative row count");
    r.sendOffset[size_t(x) + 1] = r.sendOffset[size_t(x)] + counts[x];
  }
  if (r.sendOffset.back() > senderRows)
    throw Error("the experts' row counts add up to " +
                std::to_string(r.sendOffset.back()) + ", more than the " +
                std::to_string(senderRows) + " rows");
  r.recvCounts.assign(recvCounts, recvCounts + G * r.perRank);
  r.recvOffset.assign(size_t(r.perRank * G), 0);
  int64_t next = 0;
  for (int64_t j = 0; j < r.perRank; ++j)
    for (int64_t s = 0; s < G; ++s) {
      const int32_t c = recvCounts[s * r.perRank + j];
      if (c < 0)
        throw Error("rank " + std::to_string(s) + " sends a negative row count");
      r.recvOffset[size_t(j * G + s)] = next;
      next += c;
    }
  if (next > receiverRows)
    throw Error("the " + std::to_string(next) + " rows received exceed the " +
                std::to_string(receiverRows) + " rows of the receiving buffer "
                "(a routing the compiled bound does not hold)");
  return r;
}

} // namespace dsc::rt
