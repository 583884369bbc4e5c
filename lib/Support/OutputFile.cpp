//===- OutputFile.cpp - Files dsc writes for the user --------------------===//

#include "dsc/Support/OutputFile.h"
#include "dsc/Support/Error.h"
#include "dsc/Support/Files.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace dsc {

namespace {

std::string errnoText() { return std::strerror(errno); }

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The directory must exist and take new files.
void requireWritableDirectory(const std::string &path,
                              const std::string &option) {
  const std::string dir = directoryOf(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw Error(option + ": cannot write " + path + ": directory " + dir +
                " does not exist");
  if (!S_ISDIR(st.st_mode))
    throw Error(option + ": cannot write " + path + ": " + dir +
                " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(option + ": cannot write " + path + ": directory " + dir +
                " is not writable");
}

/// Temporaries are named "<base>.tmp.<pid>.XXXXXX": one whose process no
/// longer exists was left by a write that was killed.
void removeOrphanTemporaries(const std::string &path) {
  const std::string dir = directoryOf(path);
  const std::string prefix = baseNameOf(path) + ".tmp.";
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  while (struct dirent *e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0)
      continue;
    char *end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '.' || std::strlen(end + 1) != 6)
      continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

} // namespace

void checkOutputFile(const std::string &path, const std::string &option) {
  if (path.empty())
    throw Error(option + ": empty output path");
  struct stat st;
  // A symbolic link is replaced, whatever it names.
  if (::lstat(path.c_str(), &st) == 0 && !S_ISLNK(st.st_mode)) {
    if (!S_ISREG(st.st_mode))
      throw Error(option + ": " + path + " is " + fileTypeName(st.st_mode) +
                  ", not a regular file: dsc writes a new file and renames "
                  "it into place");
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(option + ": " + path + " is not writable");
  }
  requireWritableDirectory(path, option);
  removeOrphanTemporaries(path);
}

void checkStreamOutput(const std::string &path, const std::string &option) {
  if (path.empty())
    throw Error(option + ": empty output path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw Error(option + ": " + path + " is a directory");
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(option + ": " + path + " is not writable");
    return;
  }
  requireWritableDirectory(path, option);
}

void writeFileAtomic(const std::string &requested, const std::string &bytes) {
  // The rename replaces a symbolic link at `requested` itself: what it
  // named is never written.
  const std::string &path = requested;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0)
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
      throw Error("cannot write " + requested + ": it is " +
                  fileTypeName(st.st_mode) +
                  ", not a regular file");
  const std::string dir = directoryOf(path);
  std::string tmpl = path + ".tmp." + std::to_string(::getpid()) + ".XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    throw Error("cannot write " + requested +
                ": cannot create a temporary file (" + errnoText() + ")");
  auto fail = [&](const std::string &what) {
    std::string msg =
        "cannot write " + requested + ": " + what + " (" + errnoText() + ")";
    if (fd >= 0)
      ::close(fd);
    ::unlink(name.data());
    throw Error(msg);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      fail("write failed");
    }
    if (w == 0) {
      errno = EIO;
      fail("write failed");
    }
    done += size_t(w);
  }
  if (::fchmod(fd, 0644) != 0)
    fail("chmod failed");
  if (::fsync(fd) != 0)
    fail("fsync failed");
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0)
    fail("close failed");
  if (::rename(name.data(), path.c_str()) != 0)
    fail("rename failed");
  // Persist the rename itself (best effort: some filesystems refuse).
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void replaceLinkToFile(const std::string &path, bool append,
                       const std::string &option) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
    return;
  // A link to a FIFO or a device (/dev/stdout, a pipe) is a stream.
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
      !S_ISDIR(st.st_mode))
    return;
  if (append)
    throw Error(option + ": " + path + " is a symbolic link; dsc does not "
                "append through one (remove it or name the file itself)");
  writeFileAtomic(path, "");
}

} // namespace dsc
