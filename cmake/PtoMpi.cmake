# PtoMpi.cmake — the optional MPI backend (src/comm/mpi.c) and its tests.
#
# PTO_MPI: AUTO (default: on when find_package(MPI COMPONENTS C) finds it),
# ON (MPI required) or OFF (built without MPI: asking a domain for the MPI
# backend then fails with PTO_EMPI, "pto was built without MPI").
# Sets PTO_HAVE_MPI (ON/OFF) for the rest of the build.
#
# pto_add_mpi_test(NAME <name> NP <n> COMMAND <target-or-program> [args...]
#                  [TIMEOUT <s>] [RESOURCE_LOCK <locks...>] [ENVIRONMENT <VAR=value...>])
# adds the ctest `mpi.<name>.np<n>` (LABELS mpi) running
# `mpiexec -np <n> [--oversubscribe] <program> [args]`, with Open MPI's
# allow-run-as-root settings in its environment. Nothing is added when
# PTO_HAVE_MPI is OFF. PTO_MPIEXEC_IS_OPENMPI says whether mpiexec is Open
# MPI's (tests of its run-time's own behaviour need it).
set(PTO_MPI AUTO CACHE STRING "MPI backend: AUTO (when MPI is found), ON (required) or OFF")
set_property(CACHE PTO_MPI PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${PTO_MPI}" _pto_mpi)
set(PTO_HAVE_MPI OFF)
if(_pto_mpi STREQUAL "ON")
  find_package(MPI REQUIRED COMPONENTS C)
  set(PTO_HAVE_MPI ON)
elseif(_pto_mpi STREQUAL "AUTO")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(PTO_HAVE_MPI ON)
  endif()
elseif(NOT _pto_mpi STREQUAL "OFF")
  message(FATAL_ERROR "PTO_MPI must be AUTO, ON or OFF, not '${PTO_MPI}'")
endif()
if(PTO_HAVE_MPI)
  message(STATUS "pto: MPI backend on (MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE})")
else()
  message(STATUS "pto: MPI backend off (PTO_MPI=${PTO_MPI}); mpi tests are not built")
endif()

# Open MPI's mpiexec needs --oversubscribe to run more ranks than cores;
# other implementations do not know the flag (and do not need it).
set(PTO_MPIEXEC_EXTRA "")
set(PTO_MPIEXEC_IS_OPENMPI OFF)
if(PTO_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _pto_mpiexec_v
                  ERROR_VARIABLE _pto_mpiexec_v RESULT_VARIABLE _pto_rc TIMEOUT 20)
  if(_pto_mpiexec_v MATCHES "Open MPI|OpenRTE")
    set(PTO_MPIEXEC_EXTRA --oversubscribe)
    set(PTO_MPIEXEC_IS_OPENMPI ON)
  endif()
endif()

function(pto_add_mpi_test)
  if(NOT PTO_HAVE_MPI)
    return()
  endif()
  cmake_parse_arguments(A "" "NAME;NP;TIMEOUT" "COMMAND;RESOURCE_LOCK;ENVIRONMENT" ${ARGN})
  if(NOT A_NAME OR NOT A_NP OR NOT A_COMMAND)
    message(FATAL_ERROR "pto_add_mpi_test: NAME, NP and COMMAND are required")
  endif()
  list(POP_FRONT A_COMMAND prog)
  if(TARGET ${prog})
    set(prog $<TARGET_FILE:${prog}>)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  set(t mpi.${A_NAME}.np${A_NP})
  add_test(NAME ${t}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${A_NP} ${PTO_MPIEXEC_EXTRA}
                   ${MPIEXEC_PREFLAGS} ${prog} ${MPIEXEC_POSTFLAGS} ${A_COMMAND})
  # mpi_yield_when_idle: ranks oversubscribing the cores yield instead of
  # spinning in MPI's progress loop.
  set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1;${A_ENVIRONMENT}")
  if(A_RESOURCE_LOCK)
    set_tests_properties(${t} PROPERTIES RESOURCE_LOCK "${A_RESOURCE_LOCK}")
  endif()
endfunction()

# mpi.NAME_two_hosts.np2: COMMAND (a target's program, then its arguments)
# under scripts/two_hosts.sh, one rank on each of two network-namespace
# hosts; reported not run (exit 2) where namespaces cannot be made. PASS:
# a regular expression the output must match; RESOURCE_LOCK: locks besides
# the hosts' own.
function(pto_add_two_hosts_test)
  if(NOT PTO_HAVE_MPI)
    return()
  endif()
  cmake_parse_arguments(A "" "NAME;PASS" "COMMAND;RESOURCE_LOCK;ENVIRONMENT" ${ARGN})
  list(POP_FRONT A_COMMAND prog)
  set(t mpi.${A_NAME}_two_hosts.np2)
  add_test(NAME ${t} COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/two_hosts.sh ${PROJECT_BINARY_DIR}
                             $<TARGET_FILE:${prog}> ${A_COMMAND})
  set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 150 SKIP_RETURN_CODE 2
    RESOURCE_LOCK "${A_RESOURCE_LOCK};pto_two_hosts")
  if(A_PASS)
    set_tests_properties(${t} PROPERTIES PASS_REGULAR_EXPRESSION "${A_PASS}")
  endif()
  if(A_ENVIRONMENT)
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${A_ENVIRONMENT}")
  endif()
endfunction()
