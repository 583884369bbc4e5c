//===- SwapFile.cpp - ZeRO-Infinity's NVMe swap file ----------------------===//

#include "SwapFile.h"

#include "dsc/Support/Error.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace dsc::rt {

namespace {

[[noreturn]] void fail(const std::string &dir, const std::string &what,
                       int err) {
  throw Error("nvme_path '" + dir + "': " + what + ": " + std::strerror(err));
}

} // namespace

SwapFile::SwapFile(const std::string &dir, int64_t bytes)
    : dir(dir), size(bytes) {
  std::string path = dir + "/dsc-swap-XXXXXX";
  fd = mkstemp(path.data());
  if (fd < 0)
    fail(dir, "cannot create the swap file", errno);
  // Nothing to clean up after a crash: the name goes at once, the space
  // when the last descriptor closes.
  unlink(path.c_str());
  if (bytes > 0) {
    // Reserve every block now: a full disk fails here, not mid-step.
    if (int err = posix_fallocate(fd, 0, off_t(bytes)); err != 0) {
      close(fd);
      fail(dir, "cannot reserve the " + std::to_string(bytes) +
                    "-byte swap file (the optimizer state on NVMe)",
           err);
    }
    void *p = mmap(nullptr, size_t(bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      fail(dir, "cannot map the swap file", err);
    }
    base = static_cast<char *>(p);
  }
}

SwapFile::~SwapFile() {
  if (base)
    munmap(base, size_t(size));
  if (fd >= 0)
    close(fd);
}

void SwapFile::read(int64_t offset, void *dst, int64_t bytes) const {
  char *out = static_cast<char *>(dst);
  while (bytes > 0) {
    const ssize_t n = pread(fd, out, size_t(bytes), off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      fail(dir, "reading the swap file", n < 0 ? errno : EIO);
    out += n;
    offset += n;
    bytes -= n;
  }
}

void SwapFile::write(int64_t offset, const void *src, int64_t bytes) const {
  const char *in = static_cast<const char *>(src);
  while (bytes > 0) {
    const ssize_t n = pwrite(fd, in, size_t(bytes), off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      fail(dir, "writing the swap file", n < 0 ? errno : EIO);
    in += n;
    offset += n;
    bytes -= n;
  }
}

} // namespace dsc::rt
