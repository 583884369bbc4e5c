//===- TcpCommunicator.h - Collectives over TCP, torchrun-style -*- C++ -*-===//
//
// A job started without MPI, the way torchrun (or any launcher that exports
// MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE) starts it: rank 0 listens
// on MASTER_ADDR:MASTER_PORT, every other rank connects there and learns
// where the others listen, and each pair of ranks then shares one TCP
// connection. Messages are framed (communicator, tag, bytes); collectives
// are rings over those connections (the bytes each rank sends are the
// formulas Communicator::traffic reports); each peer's connection has its
// own sending thread, so sends never wait for the peer's receive.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TCPCOMMUNICATOR_H
#define DSC_RUNTIME_TCPCOMMUNICATOR_H

#include "dsc/Runtime/Runtime.h"

#include <memory>
#include <string>

namespace dsc::rt {

struct TcpJob {
  std::string masterAddr; ///< a host name or IPv4 address
  int masterPort = 0;
  int rank = 0, worldSize = 1;
  /// From LOCAL_RANK / LOCAL_WORLD_SIZE; -1: from the ranks' host names.
  int localRank = -1, localSize = -1;
  /// How long a rank waits for a peer (DSC_COMM_TIMEOUT; 0: for ever); the
  /// start-up waits at least 60 s for the others to start.
  double timeoutSeconds = 45;
};

/// The job the environment describes (MASTER_ADDR, MASTER_PORT, RANK,
/// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, DSC_COMM_TIMEOUT); an error
/// naming the variable that is malformed (RANK without WORLD_SIZE too).
/// Every variable set is checked even in a job of one rank, which uses
/// none of them, so that a mistake shows before it matters; `connecting`
/// (the ranks are about to meet) also requires MASTER_ADDR, MASTER_PORT and
/// RANK.
TcpJob tcpJobFromEnvironment(bool connecting);

/// Connects the job's ranks (collective: every rank calls it). Errors
/// name the rank or address that failed.
std::unique_ptr<Communicator> createTcpCommunicator(const TcpJob &job);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TCPCOMMUNICATOR_H
