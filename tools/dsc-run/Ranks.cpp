//===- Ranks.cpp - dsc-run in a job of several ranks ----------------------===//

#include "Ranks.h"

#include "dsc/Runtime/Trainer.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/Hash.h"

#include <iostream>

namespace dsc {

namespace {
/// Set while a RankOutput of a multi-rank job is alive; -1 otherwise.
int currentRank = -1;
} // namespace

RankOutput::RankOutput(const rt::Communicator &comm)
    : isLeader(comm.rank() == 0) {
  if (comm.size() > 1)
    currentRank = comm.rank();
  // Writes to a stream without a buffer are dropped.
  if (!isLeader)
    saved = std::cout.rdbuf(nullptr);
}

RankOutput::~RankOutput() {
  if (!isLeader) {
    std::cout.rdbuf(saved);
    std::cout.clear();
  }
  // An exception on its way to main is still printed with the prefix.
  if (!std::uncaught_exceptions())
    currentRank = -1;
}

std::string errorPrefix() {
  int rank = currentRank;
  if (rank < 0) {
    // Before the job's communicator exists (its start-up failed, say), the
    // launcher's environment names the rank; a malformed one names none.
    try {
      rank = rt::launchedRank();
    } catch (const std::exception &) {
      rank = -1;
    }
  }
  return rank < 0 ? "" : "rank " + std::to_string(rank) + ": ";
}

bool printsError(const std::exception &e) {
  // Divergence is seen by every rank alike: the loss and gradient norm are
  // the global batch's.
  const bool agreed = dynamic_cast<const AgreedError *>(&e) ||
                      dynamic_cast<const rt::Diverged *>(&e);
  return currentRank <= 0 || !agreed;
}

uint64_t fileFingerprint(const std::string &path) {
  return path.empty() ? 0 : fnv1a64(readRegularFile(path));
}

void requireSameInputs(rt::Communicator &comm,
                       const std::vector<JobInput> &inputs) {
  const int ranks = comm.size();
  std::vector<uint64_t> mine;
  for (const JobInput &in : inputs)
    mine.push_back(in.fingerprint);
  std::vector<uint64_t> all(mine.size() * size_t(ranks));
  comm.allGather(mine.data(), all.data(),
                 int64_t(mine.size() * sizeof(uint64_t)));
  for (size_t k = 0; k < inputs.size(); ++k)
    for (int r = 1; r < ranks; ++r) {
      const uint64_t zero = all[k], other = all[size_t(r) * mine.size() + k];
      if (other == zero)
        continue;
      std::string what = inputs[k].what;
      if (!inputs[k].detail.empty())
        what += " (" + inputs[k].detail + " on rank 0)";
      throw AgreedError("the ranks were started differently: rank " +
                        std::to_string(r) + "'s " + what +
                        (zero && other ? " differs from rank 0's"
                         : zero        ? " is missing"
                                       : " is not given on rank 0") +
                        "; every rank must get the same command, files and "
                        "DSC_* settings");
    }
}

} // namespace dsc
