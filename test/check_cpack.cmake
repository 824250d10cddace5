# README's packaging commands, checked: `cpack -G DEB` and `cpack -G RPM` build both packages
# (runtime and -dbg); the runtime package holds the stripped library, the tuner and profiler
# names as symlinks to it, and the tool; the -dbg package holds the debug file; the Debian
# package declares its glibc floor; and the library unpacked from the .deb loads and runs one
# communicator's plugin init through the tool shipped beside it (`autopilot info`).
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
set(generators DEB)
find_program(RPMBUILD rpmbuild)
if(RPMBUILD)
  list(APPEND generators RPM)
elseif("$ENV{CI}" STREQUAL "true")
  message(FATAL_ERROR "rpmbuild missing (Debian's rpm package) under CI")
else()
  message(WARNING "rpmbuild missing (Debian's rpm package): only the DEB packages are checked")
endif()
list(JOIN generators ";" gen)
execute_process(COMMAND cpack -G "${gen}" --config ${BUILD}/CPackConfig.cmake -B ${OUT}
                WORKING_DIRECTORY ${BUILD} RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cpack -G ${gen} failed:\n${log}")
endif()

function(expect_lines what text)
  foreach(pattern ${ARGN})
    if(NOT text MATCHES "${pattern}")
      message(FATAL_ERROR "${what} lacks ${pattern}:\n${text}")
    endif()
  endforeach()
endfunction()

file(GLOB deb ${OUT}/nccl-autopilot_*.deb)
file(GLOB debdbg ${OUT}/nccl-autopilot-dbg_*.deb)
if(NOT deb OR NOT debdbg)
  message(FATAL_ERROR "cpack made no nccl-autopilot_*.deb and nccl-autopilot-dbg_*.deb in ${OUT}")
endif()
set(lib "usr/${LIBDIR}")
execute_process(COMMAND dpkg-deb -c ${deb} OUTPUT_VARIABLE contents)
expect_lines("${deb}" "${contents}"
  "\\./${lib}/libnccl-net-autopilot\\.so\n"
  "\\./${lib}/libnccl-tuner-autopilot\\.so -> libnccl-net-autopilot\\.so"
  "\\./${lib}/libnccl-profiler-autopilot\\.so -> libnccl-net-autopilot\\.so"
  "\\./usr/bin/autopilot\n")
if(contents MATCHES "\\.debug")
  message(FATAL_ERROR "the runtime package carries debug files:\n${contents}")
endif()
execute_process(COMMAND dpkg-deb -c ${debdbg} OUTPUT_VARIABLE contents)
expect_lines("${debdbg}" "${contents}" "\\./${lib}/\\.debug/libnccl-net-autopilot\\.so\\.debug")
execute_process(COMMAND dpkg-deb -f ${deb} Depends OUTPUT_VARIABLE depends)
expect_lines("${deb} Depends" "${depends}" "libc6 \\(>= 2\\.34\\)")
# The tool links SimGrid when the build found it: its runtime must be declared.
if(SIMGRID_ABI)
  string(REPLACE "." "\\." abi "${SIMGRID_ABI}")
  expect_lines("${deb} Depends" "${depends}" "libsimgrid${abi}")
endif()

# The packaged library, unpacked, loads as NCCL would load it and inits a communicator.
set(root ${OUT}/unpacked)
execute_process(COMMAND dpkg-deb -x ${deb} ${root} RESULT_VARIABLE rc)
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH
                        ${root}/usr/bin/autopilot info
                RESULT_VARIABLE rc OUTPUT_VARIABLE info ERROR_VARIABLE info)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autopilot info from the unpacked package failed (${rc}):\n${info}")
endif()
expect_lines("autopilot info (unpacked package)" "${info}"
  "file +${root}/usr/bin/\\.\\./${LIBDIR}/libnccl-net-autopilot\\.so"
  "symbol +ncclNetPlugin_v[0-9]+" "symbol +ncclTunerPlugin_v[0-9]+" "symbol +ncclProfiler_v[0-9]+"
  "init ok")

if(RPMBUILD)
  file(GLOB rpm ${OUT}/nccl-autopilot-[0-9]*.rpm)
  file(GLOB rpmdbg ${OUT}/nccl-autopilot-dbg-[0-9]*.rpm)
  if(NOT rpm OR NOT rpmdbg)
    message(FATAL_ERROR "cpack made no nccl-autopilot and nccl-autopilot-dbg .rpm in ${OUT}")
  endif()
  execute_process(COMMAND rpm -qlp ${rpm} OUTPUT_VARIABLE contents ERROR_QUIET)
  expect_lines("${rpm}" "${contents}" "/${lib}/libnccl-net-autopilot\\.so\n"
    "/${lib}/libnccl-tuner-autopilot\\.so\n" "/${lib}/libnccl-profiler-autopilot\\.so\n"
    "/usr/bin/autopilot\n")
  execute_process(COMMAND rpm -qlp ${rpmdbg} OUTPUT_VARIABLE contents ERROR_QUIET)
  expect_lines("${rpmdbg}" "${contents}" "/${lib}/\\.debug/libnccl-net-autopilot\\.so\\.debug")
endif()
message(STATUS "cpack ${gen}: both packages as documented; the unpacked library loads and inits")
file(REMOVE_RECURSE ${OUT})
