//===- NoMpiCommunicator.cpp - A build without MPI ------------------------===//
//
// Built instead of MpiCommunicator.cpp when CMake finds no MPI or
// DSC_ENABLE_MPI is off (the static GPU bundle): one rank only.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"

namespace dsc::rt {

std::unique_ptr<Communicator> createMpiCommunicator(const LaunchEnvironment &env) {
  throw Error(env.mpiLauncher + " started " + std::to_string(env.worldSize) +
              " ranks, but this dsc was built without MPI (configure with "
              "libopenmpi-dev installed and DSC_ENABLE_MPI=ON)");
}

} // namespace dsc::rt
