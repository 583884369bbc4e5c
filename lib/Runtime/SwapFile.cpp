//===- SwapFile.cpp - ZeRO-Infinity's NVMe swap file ----------------------===//

#include "SwapFile.h"

#include "dsc/Support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
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

SwapFile::SwapFile(const std::string &dir, int64_t bytes,
                   const AioOptions &aio)
    : dir(dir), size((bytes + kAlignment - 1) / kAlignment * kAlignment) {
  std::string path = dir + "/dsc-swap-XXXXXX";
  fd = mkstemp(path.data());
  if (fd < 0)
    fail(dir, "cannot create the swap file", errno);
  // Nothing to clean up after a crash: the name goes at once, the space
  // when the last descriptor closes.
  unlink(path.c_str());
  if (size > 0) {
    // Reserve every block now (whole direct blocks): a full disk fails
    // here, not mid-step.
    if (int err = posix_fallocate(fd, 0, off_t(size)); err != 0) {
      close(fd);
      fail(dir, "cannot reserve the " + std::to_string(bytes) +
                    "-byte swap file (the optimizer state on NVMe)",
           err);
    }
    void *p = mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      close(fd);
      fail(dir, "cannot map the swap file", err);
    }
    base = static_cast<char *>(p);
  }
  // The step's transfers bypass the page cache where the file system
  // allows it (the mapping is unaffected: O_DIRECT applies to read/write).
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) {
    try {
      io = std::make_unique<SwapIo>(fd, aio, "nvme_path '" + dir + "'");
    } catch (...) {
      release();
      throw;
    }
    return;
  }
  // Said once per directory (swap-bench opens several swap files there).
  static std::mutex notedLock;
  static std::set<std::string> noted;
  const int err = errno;
  std::lock_guard<std::mutex> lock(notedLock);
  if (noted.insert(dir).second)
    std::fprintf(stderr,
                 "dsc: nvme_path '%s' does not allow O_DIRECT (%s); the swap "
                 "file goes through the page cache\n",
                 dir.c_str(), std::strerror(err));
}

SwapFile::~SwapFile() {
  io.reset();
  release();
}

void SwapFile::release() {
  if (base)
    munmap(base, size_t(size));
  if (fd >= 0)
    close(fd);
  base = nullptr;
  fd = -1;
}

void SwapFile::transfer(bool out, int64_t offset, char *data,
                        int64_t bytes) const {
  const char *what = out ? "writing the swap file" : "reading the swap file";
  // Never past the space reserved up front (direct transfers pad their
  // last block to the alignment).
  const int64_t end =
      offset + (io ? (bytes + kAlignment - 1) / kAlignment * kAlignment : bytes);
  if (offset < 0 || bytes < 0 || end > size)
    fail(dir, std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                  std::to_string(offset + bytes) + ") outside its " +
                  std::to_string(size) + " bytes",
         EINVAL);
  if (io) {
    if (offset % kAlignment != 0)
      fail(dir, std::string(what) + " at offset " + std::to_string(offset) +
                    " (not a multiple of 4096)",
           EINVAL);
    io->transfer(out, offset, data, bytes);
    return;
  }
  // Through the page cache: any offset, straight to and from `data`.
  if (int err = SwapIo::blockingTransfer(fd, out, data, bytes, offset))
    fail(dir, what, err);
}

void SwapFile::read(int64_t offset, void *dst, int64_t bytes) const {
  transfer(false, offset, static_cast<char *>(dst), bytes);
}

void SwapFile::write(int64_t offset, const void *src, int64_t bytes) const {
  transfer(true, offset, const_cast<char *>(static_cast<const char *>(src)),
           bytes);
}

} // namespace dsc::rt
