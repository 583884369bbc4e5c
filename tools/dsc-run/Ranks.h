//===- Ranks.h - dsc-run in a job of several ranks -------------*- C++ -*-===//
//
// Under mpirun or srun every rank runs the same dsc-run command. Only rank 0
// prints and writes files; every rank checks at start-up that all were
// given the same command line, files and compiled step, and refuses to train
// otherwise (naming the first difference), because ranks that disagree would
// otherwise train on silently inconsistent data.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUN_RANKS_H
#define DSC_RUN_RANKS_H

#include "dsc/Runtime/Runtime.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace dsc {

/// While alive, stdout of every rank but 0 is discarded, and error lines
/// of a multi-rank job start with "rank R: " (errorPrefix).
class RankOutput {
public:
  explicit RankOutput(const rt::Communicator &comm);
  ~RankOutput();
  RankOutput(const RankOutput &) = delete;
  RankOutput &operator=(const RankOutput &) = delete;
  bool leader() const { return isLeader; }

private:
  std::streambuf *saved = nullptr;
  bool isLeader = true;
};

/// "rank R: " inside a multi-rank job's RankOutput, else the rank the
/// launcher's environment announces (start-up errors), else "".
std::string errorPrefix();

/// Thrown on every rank when the ranks found the same problem together (a
/// start-up mismatch): only rank 0 prints it.
struct AgreedError : dsc::Error {
  using dsc::Error::Error;
};
/// Whether this process prints `e`: rank 0 prints everything; other ranks
/// leave AgreedError and rt::Diverged, which every rank throws alike, to it.
bool printsError(const std::exception &e);

/// Something every rank must have the same of.
struct JobInput {
  std::string what;    ///< "--config", "the command line", ...
  std::string detail;  ///< rank 0's value, for the message ("c.json")
  uint64_t fingerprint; ///< 0: absent
};

/// The fingerprint of a file's bytes (0 when `path` is empty).
uint64_t fileFingerprint(const std::string &path);

/// All-gathers the fingerprints and throws AgreedError naming the first
/// input in which a rank differs from rank 0. Every rank must pass the same
/// number of inputs.
void requireSameInputs(rt::Communicator &comm,
                       const std::vector<JobInput> &inputs);

} // namespace dsc

#endif // DSC_RUN_RANKS_H
