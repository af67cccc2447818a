// Reads a FIFO on another thread, for tests that check a writer goes through one.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <future>
#include <string>

namespace qd::testing {

// Opens `path` for reading now (so a writer's open does not block), then collects what arrives
// until the writer closes it. Gives "TIMEOUT" when nothing happens for 10 s: a writer that
// replaced the FIFO instead of writing into it never opens it.
inline std::future<std::string> drain_fifo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  return std::async(std::launch::async, [fd] {
    std::string text;
    bool writer_seen = false;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) break;
      char buffer[1 << 16];
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        writer_seen = true;
        text.append(buffer, static_cast<size_t>(n));
      } else if (n == 0 && writer_seen) {
        ::close(fd);
        return text;  // the writer closed
      } else {
        ::usleep(1000);  // no writer yet: poll reports a hang-up until one opens
      }
    }
    ::close(fd);
    return std::string("TIMEOUT");
  });
}

}  // namespace qd::testing
