//===- Launcher.h - What the launcher's environment says -------*- C++ -*-===//
//
// mpirun, mpiexec, srun and torchrun tell a process its place in the job by
// environment variables. The runtime reads them to pick a communicator and to
// check that MPI sees the job the launcher started.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_LAUNCHER_H
#define DSC_LIB_RUNTIME_LAUNCHER_H

#include "dsc/Runtime/Runtime.h"

#include <string>

namespace dsc::rt {

struct LaunchEnvironment {
  /// The MPI launcher whose variables are set ("mpirun (Open MPI)",
  /// "srun", ...); empty when none.
  std::string mpiLauncher;
  /// The job size the environment announces (1 when it announces none) and
  /// the variable that said so.
  int worldSize = 1;
  std::string worldSizeVariable;
  /// This process's rank as the same launcher announces it
  /// (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, RANK); -1 when it
  /// announces none.
  int rank = -1;
};

/// Reads OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS and WORLD_SIZE, and
/// the rank variable beside the one set. A malformed value is an error
/// naming the variable.
LaunchEnvironment readLaunchEnvironment();

/// The MPI communicator (MpiCommunicator.cpp); throws when this build has no
/// MPI (NoMpiCommunicator.cpp).
std::unique_ptr<Communicator> createMpiCommunicator(const LaunchEnvironment &env);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_LAUNCHER_H
