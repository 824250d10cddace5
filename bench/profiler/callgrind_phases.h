// Instruction counts of named phases of a benchmark, under valgrind's callgrind: deterministic
// where wall-clock figures on a shared machine are not. The benchmark re-runs itself under
// callgrind (one thread per file, --separate-threads=yes); in that run each phase is bracketed
// by beginPhase() / endPhase(name), which zero the counters and dump them through callgrind's
// client requests; the parent then reads, for each phase, the instructions executed by the
// thread that ran it (background threads such as the profiler's service thread have their
// own files and are left out). Outside valgrind the brackets do nothing.
#pragma once

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define AUTOPILOT_HAVE_CALLGRIND 1
#else
#define AUTOPILOT_HAVE_CALLGRIND 0
#endif

namespace autopilot::cli::callgrind {

inline bool underValgrind() {
#if AUTOPILOT_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

inline void beginPhase() {
#if AUTOPILOT_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
}

inline void endPhase(const char* name) {
#if AUTOPILOT_HAVE_CALLGRIND
  CALLGRIND_DUMP_STATS_AT(name);
#else
  (void)name;
#endif
}

// Whether this machine can count: the client requests were compiled in and valgrind is on PATH.
inline bool available(std::string* why) {
  if (!AUTOPILOT_HAVE_CALLGRIND) {
    *why = "built without <valgrind/callgrind.h> (Debian package valgrind)";
    return false;
  }
  if (std::system("valgrind --version >/dev/null 2>&1") != 0) {
    *why = "valgrind is not installed (Debian package valgrind)";
    return false;
  }
  return true;
}

// Runs this executable with `args` under callgrind and returns, per phase name, the
// instructions its dumping thread executed. False with *error on any failure.
inline bool countPhases(const std::vector<std::string>& args,
                        std::map<std::string, uint64_t>* counts, std::string* error) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    *error = "cannot find this executable";
    return false;
  }
  exe[n] = '\0';
  char dirTemplate[] = "/tmp/ap-callgrind-XXXXXX";
  if (mkdtemp(dirTemplate) == nullptr) {
    *error = "mkdtemp failed";
    return false;
  }
  const std::string dir = dirTemplate;
  std::string out = "--callgrind-out-file=" + dir + "/cg.out";
  std::vector<std::string> argvS = {"valgrind",
                                    "--tool=callgrind",
                                    "--quiet",
                                    "--separate-threads=yes",
                                    "--collect-atstart=yes",
                                    "--dump-instr=no",
                                    out,
                                    exe};
  argvS.insert(argvS.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (std::string& a : argvS) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp("valgrind", argv.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    *error = "valgrind --tool=callgrind run failed (status " + std::to_string(status) + ")";
  }
  // Each dump is cg.out.<part>-<thread>: "desc: Trigger: Client Request: NAME" then
  // "summary: <instructions>" (the only event counted without --cache-sim).
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string file = dir + "/" + e->d_name;
      std::string name = e->d_name;
      // Thread 1 ran the phases; other threads' files are background work.
      if (name.rfind("cg.out", 0) == 0 && name.size() > 3 &&
          name.compare(name.size() - 3, 3, "-01") == 0) {
        std::ifstream in(file);
        std::string line, phase;
        const std::string trigger = "desc: Trigger: Client Request: ";
        while (std::getline(in, line)) {
          if (line.rfind(trigger, 0) == 0) phase = line.substr(trigger.size());
          if (line.rfind("summary: ", 0) == 0 && !phase.empty()) {
            (*counts)[phase] += std::strtoull(line.c_str() + 9, nullptr, 10);
          }
        }
      }
      if (e->d_name[0] != '.') unlink(file.c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
  if (error->empty() && counts->empty()) *error = "callgrind wrote no phase dumps";
  return error->empty();
}

}  // namespace autopilot::cli::callgrind
