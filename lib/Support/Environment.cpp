//===- Environment.cpp - Boolean DSC_* environment variables --------------===//

#include "dsc/Support/Environment.h"

#include <cstdlib>
#include <cstring>
#include <string>

bool dsc::envFlag(const char *name, bool absent) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return absent;
  if (std::strcmp(value, "0") == 0)
    return false;
  if (std::strcmp(value, "1") == 0)
    return true;
  throw EnvironmentError(std::string("environment variable ") + name + "='" +
                         value + "' is not 0 or 1");
}
