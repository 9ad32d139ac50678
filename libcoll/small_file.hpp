// read_small_file: the whole of a small configuration file (COLL_TUNING_FILE,
// collrun's --hostfile), refusing what is not one. A path from the user may
// name anything: /dev/zero (read until memory runs out), a FIFO (open and
// read block forever, whatever COLL_TIMEOUT says), a directory (reads as
// empty), a file of gigabytes. So: opened with O_NONBLOCK (a FIFO does not
// block the open), fstat'ed, regular files only, at most max_bytes, read
// whole. Header-only: collrun and the library both use it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace coll {

inline constexpr size_t kMaxConfigFileBytes = size_t(1) << 20;

// "" on success (*contents holds the file), else why not: "cannot open: No
// such file or directory", "not a regular file (a FIFO)", "is 5000000 bytes,
// more than the 1048576 a configuration file may have", "read: ...".
inline std::string read_small_file(const std::string& path, size_t max_bytes,
                                   std::string* contents) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return std::string("cannot stat: ") + std::strerror(err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    return std::string("not a regular file (") + kind + ")";
  }
  if (size_t(st.st_size) > max_bytes) {
    close(fd);
    return "is " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(max_bytes) + " a configuration file may have";
  }
  contents->clear();
  char buf[8192];
  for (;;) {
    const ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      close(fd);
      return std::string("read: ") + std::strerror(err);
    }
    if (got == 0) break;
    contents->append(buf, size_t(got));
    if (contents->size() > max_bytes) {  // grew while we read it
      close(fd);
      return "grew past " + std::to_string(max_bytes) + " bytes while it was read";
    }
  }
  close(fd);
  return "";
}

}  // namespace coll
