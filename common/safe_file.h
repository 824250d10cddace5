// Files written inside someone else's job, in folders that other users may share (/tmp, NFS):
// a path may have been replaced by a symlink to a file the job's user can write, a FIFO, or be
// locked by a stuck NFS client. These helpers never follow a planted link, never block without
// bound and never leave a partial file where a complete one is expected.
#pragma once

#include <sys/stat.h>

#include <string>

namespace autopilot {

// Reads a whole regular file of at most `maxBytes` (a FIFO or device could block or never end;
// a larger file is refused, not truncated). `info` (optional) gets its fstat(). False with
// *error set otherwise; errno is kept for the caller's diagnosis (ENOENT, EACCES, ...).
bool readRegularFile(const std::string& path, size_t maxBytes, std::string* out, std::string* error,
                     struct stat* info = nullptr);

// Writes `text` to a new temporary file created exclusively (O_EXCL, unpredictable name) in the
// target's folder, then renames it over `path`: readers see the old or the new file, never a
// partial one, and a link planted at `path` is replaced, not followed. Mode 0644 (`mode`).
// False with *error set on any failure; the temporary is removed.
bool writeFileAtomically(const std::string& path, const std::string& text, std::string* error,
                         unsigned mode = 0644);

// Opens `path` for streaming writes (truncated, or appended to), refusing to follow a symlink
// at its last component and refusing anything but a regular file (a FIFO would block the
// writer). Returns the descriptor (close-on-exec), or -1 with *error set.
int openExportFile(const std::string& path, bool append, std::string* error);

// Takes an exclusive flock() on `lockPath` (created 0600, never through a symlink), waiting at
// most `timeoutMs`. Returns the locked descriptor (close it to unlock), or -1 with *error set
// when the lock is held longer (a stuck NFS lock must not hang NCCL's finalize).
int lockFileWithin(const std::string& lockPath, int timeoutMs, std::string* error);

}  // namespace autopilot
