//===- VersionedLibrary.cpp - dlopen a library and read its version -------===//

#include "VersionedLibrary.h"

#include <dlfcn.h>

namespace dsc::rt {

void *openVersionedLibrary(const std::string &name, const char *versionSymbol,
                           const std::string &what, std::string &path,
                           size_t &version, std::string &why) {
  dlerror();
  void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *error = dlerror();
    why = error ? error : "dlopen failed";
    return nullptr;
  }
  auto getVersion =
      reinterpret_cast<size_t (*)()>(dlsym(handle, versionSymbol));
  // The file the loader picked, for the messages and the caller.
  Dl_info where{};
  const bool located = getVersion &&
                       dladdr(reinterpret_cast<void *>(getVersion), &where) &&
                       where.dli_fname;
  path = located ? where.dli_fname : name;
  if (!getVersion) {
    why = path + " has no " + versionSymbol + ": not " + what;
    dlclose(handle);
    return nullptr;
  }
  version = getVersion();
  return handle;
}

} // namespace dsc::rt
