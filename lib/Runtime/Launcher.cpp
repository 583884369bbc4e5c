//===- Launcher.cpp - What the launcher's environment says ----------------===//

#include "Launcher.h"

#include <cstdlib>

namespace dsc::rt {

long long envInteger(const char *name, long long absent, long long min,
                     long long max) {
  const char *text = std::getenv(name);
  if (!text)
    return absent;
  char *end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || v < min || v > max)
    throw Error(std::string("environment variable ") + name + "='" + text +
                "' is not an integer in [" + std::to_string(min) + ", " +
                std::to_string(max) + "]");
  return v;
}

LaunchEnvironment readLaunchEnvironment() {
  LaunchEnvironment env;
  // The first variable set names the launcher; later ones are what srun or
  // torchrun export alongside.
  struct Source {
    const char *sizeVariable, *rankVariable, *launcher;
  };
  const Source sources[] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "mpirun (Open MPI)"},
      {"PMI_SIZE", "PMI_RANK", "a PMI launcher (mpiexec)"},
      {"SLURM_NTASKS", "SLURM_PROCID", "srun"},
  };
  for (const Source &s : sources) {
    long long n = envInteger(s.sizeVariable, 0, 1, 1 << 20);
    if (!n)
      continue;
    // Inside an sbatch allocation SLURM_NTASKS is set for the batch script
    // too; only srun's tasks carry SLURM_PROCID and SLURM_STEP_ID.
    if (std::string(s.sizeVariable) == "SLURM_NTASKS" &&
        !(std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_ID")))
      continue;
    env.mpiLauncher = s.launcher;
    env.worldSize = int(n);
    env.worldSizeVariable = s.sizeVariable;
    env.rank = int(envInteger(s.rankVariable, -1, 0, n - 1));
    return env;
  }
  if (long long n = envInteger("WORLD_SIZE", 0, 1, 1 << 20)) {
    env.worldSize = int(n);
    env.worldSizeVariable = "WORLD_SIZE";
    env.rank = int(envInteger("RANK", -1, 0, n - 1));
  }
  return env;
}

double collectiveTimeoutSeconds() {
  return double(envInteger("DSC_COMM_TIMEOUT", 45, 0, 86400));
}

} // namespace dsc::rt
