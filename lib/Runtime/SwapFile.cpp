//===- SwapFile.cpp - ZeRO-Infinity's NVMe swap file ----------------------===//

#include "SwapFile.h"

#include "dsc/Support/Error.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

void freeStaging(char *p) { std::free(p); }

} // namespace

SwapFile::SwapFile(const std::string &dir, int64_t bytes)
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
    void *buffer = nullptr;
    if (posix_memalign(&buffer, size_t(kAlignment), size_t(kRequestBytes)) ==
        0) {
      staging = {static_cast<char *>(buffer), &freeStaging};
      return;
    }
    fcntl(fd, F_SETFL, flags);
  }
  std::fprintf(stderr,
               "dsc: nvme_path '%s' does not allow O_DIRECT (%s); the swap "
               "file goes through the page cache\n",
               dir.c_str(), std::strerror(errno));
}

SwapFile::~SwapFile() {
  if (base)
    munmap(base, size_t(size));
  if (fd >= 0)
    close(fd);
}

void SwapFile::transfer(bool out, int64_t offset, char *data,
                        int64_t bytes) const {
  const char *what = out ? "writing the swap file" : "reading the swap file";
  const bool viaStaging = staging && offset % kAlignment == 0;
  std::unique_lock<std::mutex> lock(stagingInUse, std::defer_lock);
  if (viaStaging)
    lock.lock();
  else if (staging)
    fail(dir, std::string(what) + " at offset " + std::to_string(offset) +
                  " (not a multiple of 4096)",
         EINVAL);
  while (bytes > 0) {
    // One request: `n` bytes of data, `whole` with the block's padding.
    const int64_t n = viaStaging ? std::min(bytes, kRequestBytes) : bytes;
    const int64_t whole =
        viaStaging ? (n + kAlignment - 1) / kAlignment * kAlignment : n;
    char *io = viaStaging ? staging.get() : data;
    if (viaStaging && out) {
      std::memcpy(io, data, size_t(n));
      std::memset(io + n, 0, size_t(whole - n)); // up to the next tensor
    }
    for (int64_t done = 0; done < whole;) {
      const ssize_t k =
          out ? pwrite(fd, io + done, size_t(whole - done), off_t(offset + done))
              : pread(fd, io + done, size_t(whole - done), off_t(offset + done));
      if (k < 0 && errno == EINTR)
        continue;
      if (k <= 0)
        fail(dir, what, k < 0 ? errno : EIO);
      done += k;
    }
    if (viaStaging && !out)
      std::memcpy(data, io, size_t(n));
    data += n;
    offset += n;
    bytes -= n;
  }
}

void SwapFile::read(int64_t offset, void *dst, int64_t bytes) const {
  transfer(false, offset, static_cast<char *>(dst), bytes);
}

void SwapFile::write(int64_t offset, const void *src, int64_t bytes) const {
  transfer(true, offset, const_cast<char *>(static_cast<const char *>(src)),
           bytes);
}

} // namespace dsc::rt
