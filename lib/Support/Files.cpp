//===- Files.cpp - Reading user files and JSON safely ---------------------===//

#include "dsc/Support/Files.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace dsc {

namespace {

[[noreturn]] void notRegular(const std::string &path, mode_t mode) {
  throw FileError(path + " is not a regular file (" + fileTypeName(mode) + ")");
}

[[noreturn]] void cannot(const char *what, const std::string &path,
                         int err) {
  throw FileError(std::string("cannot ") + what + " " + path + ": " +
                  std::strerror(err));
}

} // namespace

const char *fileTypeName(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a file";
}

void requireRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    cannot("open", path, errno);
  if (!S_ISREG(st.st_mode))
    notRegular(path, st.st_mode);
}

std::string readRegularFile(const std::string &path, uint64_t maxBytes,
                            const std::string &what) {
  // stat first: opening a FIFO blocks until a writer appears, and opening a
  // device can have side effects. O_NONBLOCK and the fstat below cover a
  // file swapped in between.
  requireRegularFile(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    cannot("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    cannot("read", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    notRegular(path, st.st_mode);
  }
  auto tooBig = [&](uint64_t size) {
    ::close(fd);
    throw FileError(path + " is " + std::to_string(size) +
                    " bytes, over the " + std::to_string(maxBytes) +
                    " byte limit" + (what.empty() ? "" : " for " + what));
  };
  if (uint64_t(st.st_size) > maxBytes)
    tooBig(uint64_t(st.st_size));
  std::string out;
  out.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      cannot("read", path, err);
    }
    if (r == 0)
      break;
    out.append(buf, size_t(r));
    if (out.size() > maxBytes) // grew while being read
      tooBig(out.size());
  }
  ::close(fd);
  return out;
}

nlohmann::json parseStrictJson(std::string_view text, int maxDepth) {
  using json = nlohmann::json;
  // One frame per open container: its kind, the key being parsed and the
  // keys seen so far. Paths are built only for a message, so the memory is
  // linear in the input (a path per level would be quadratic in the depth).
  struct Frame {
    bool isObject;
    std::string lastKey;
    std::set<std::string> keys;
  };
  std::vector<Frame> stack;
  auto pathOf = [&](size_t levels) {
    std::string p;
    for (size_t i = 0; i < levels; ++i) {
      const Frame &f = stack[i];
      if (!f.isObject)
        p += "[]";
      else
        p += (p.empty() ? "" : ".") + f.lastKey;
      if (p.size() > 160) {
        p = p.substr(0, 150) + "...";
        break;
      }
    }
    return p;
  };
  json::parser_callback_t cb = [&](int, json::parse_event_t ev,
                                   json &parsed) -> bool {
    switch (ev) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      if (stack.size() >= size_t(maxDepth)) {
        std::string p = pathOf(stack.size());
        throw JsonError(JsonError::TooDeep, p,
                        (p.empty() ? "" : p + ": ") +
                            "nesting too deep (more than " +
                            std::to_string(maxDepth) + " levels)");
      }
      stack.push_back({ev == json::parse_event_t::object_start, {}, {}});
      break;
    case json::parse_event_t::object_end:
    case json::parse_event_t::array_end:
      if (!stack.empty())
        stack.pop_back();
      break;
    case json::parse_event_t::key: {
      Frame &f = stack.back();
      std::string k = parsed.get<std::string>();
      if (!f.keys.insert(k).second) {
        std::string p = pathOf(stack.size() - 1);
        p += (p.empty() ? "" : ".") + k;
        throw JsonError(JsonError::DuplicateKey, p, p + ": duplicate key");
      }
      f.lastKey = std::move(k);
      break;
    }
    default:
      break;
    }
    return true;
  };
  // nlohmann reports syntax errors as parse_error and a number too large
  // for a double ("1e400") as out_of_range 406: both are malformed input.
  auto malformed = [](const json::exception &e) {
    std::string msg = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    if (!msg.empty() && msg[0] == '[') {
      size_t close = msg.find("] ");
      if (close != std::string::npos)
        msg = msg.substr(close + 2);
    }
    // The overflow message quotes the whole number, which may be the
    // whole file.
    if (msg.size() > 200)
      msg = msg.substr(0, 190) + "...";
    return JsonError(JsonError::Malformed, "", "malformed JSON: " + msg);
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::parse_error &e) {
    throw malformed(e);
  } catch (const json::out_of_range &e) {
    throw malformed(e);
  }
}

} // namespace dsc
