# node.cmake — node programs under mpirun (chips as MPI ranks, docs/node.md
# "Under mpirun"): the same binaries as the dist tests, the same checks.
# Included from tests/CMakeLists.txt; pto_add_mpi_test adds nothing without
# PTO_HAVE_MPI.
foreach(np 2 4)
  # acceptance scenes 1-10, fault injection off and on (at -np 2 the
  # 3-chip scene 10 is listed as not run)
  pto_add_mpi_test(NAME dist_scenes NP ${np} COMMAND test_dist_scenes TIMEOUT 120
                   RESOURCE_LOCK pto_devices)
  # scene 11: the collectives (at -np 2 on 2 chips; node-level calls at -np 4)
  pto_add_mpi_test(NAME dist_coll NP ${np} COMMAND test_dist_coll TIMEOUT 120
                   RESOURCE_LOCK pto_devices)
endforeach()
# ... and its refusals (test_mismatch: arguments that differ or are wrong,
# each named on every rank, then a good run) on MPI RMA windows, where a
# view of a peer's copy of a window buffer is an inaccessible reservation:
# a scratch, src or dst there is refused by name, never touched (SIGSEGV)
pto_add_mpi_test(NAME dist_coll_refusals_rma NP 2 COMMAND test_dist_coll test_mismatch
                 TIMEOUT 120 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)
# ... and on RMA windows with records whole (Open MPI's TCP transport on one
# host, no shared-memory one: no pieces), where a record longer than a
# one-way broadcast's is refused by MPI as truncated, and named (case 33)
pto_add_mpi_test(NAME dist_coll_refusals_tcp NP 2 COMMAND test_dist_coll test_mismatch
                 TIMEOUT 120 RESOURCE_LOCK pto_devices
                 ENVIRONMENT "PTO_MPI_SHARED_WINDOWS=0;OMPI_MCA_btl=tcp,self;OMPI_MCA_osc=ucx")
# ... and all of scene 11 on 4 ranks' RMA windows, where every collective
# goes through MPI's records and small broadcasts are one-way there
pto_add_mpi_test(NAME dist_coll_rma NP 4 COMMAND test_dist_coll TIMEOUT 120
                 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)
# ... and a domain of one chip on RMA windows (Open MPI makes no RMA window of
# one process: such a domain gets plain shared memory)
pto_add_mpi_test(NAME dist_coll_one_rank_rma NP 2 COMMAND test_dist_coll test_one_rank
                 TIMEOUT 120 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)
# checking mode with chip 1 as MPI rank 1 (docs/contracts.md, "Under
# mpirun"): remote stores outside the window targets named from the
# breaching rank, stores inside them landing, host tasks' writes checked
pto_add_mpi_test(NAME node_contracts NP 2 COMMAND test_node_contracts TIMEOUT 120
                 RESOURCE_LOCK pto_devices)

# Node faults under mpirun (tests/mpi/test_node_mpi_faults.c): refusals that
# name what cannot cross ranks; MPI initialised without MPI_THREAD_MULTIPLE; a rank that dies (SIGKILL: mpirun names it and
# ends the job) or stops answering (SIGSTOP: rank 0's heartbeat deadline,
# control_timeout_ms = 2 s, names "chip rank 1 (MPI rank 1 ...)") ends the
# job within the deadline, leaving no process.
if(PTO_HAVE_MPI)
  add_executable(test_node_mpi_faults ${CMAKE_CURRENT_LIST_DIR}/test_node_mpi_faults.c)
  target_link_libraries(test_node_mpi_faults PRIVATE pto_internal MPI::MPI_C)
  pto_add_mpi_test(NAME node_refusals NP 2 COMMAND test_node_mpi_faults refusals TIMEOUT 60
                   RESOURCE_LOCK pto_devices)
  pto_add_mpi_test(NAME node_thread_level NP 2 COMMAND test_node_mpi_faults single TIMEOUT 60)
  foreach(mode kill stop)
    set(t mpi.node_rank_${mode}.np2)
    add_test(NAME ${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rank_fault.sh ${MPIEXEC_EXECUTABLE}
                               $<TARGET_FILE:test_node_mpi_faults> ${mode} 10
                               "rank 1" $<IF:$<STREQUAL:${mode},stop>,stopped.responding,signal.9>)
    set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 60 RESOURCE_LOCK pto_devices
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
  endforeach()
endif()

# ... and a kernel's allreduce on MPI's path (RMA windows; 2 chips: one
# exchange, src/comm/mpi_coll.c pair_allreduce) that the
# other chip never calls: the caller (chip 0, a thread of rank 0; or chip 1,
# rank 1) ends the job PTO_MPI_COLL_GRACE_MS (500 ms here) after its 1 ms
# deadline, naming the call; the run's objects are unlinked first (the comm
# layer's job-end hook), none is left.
if(PTO_HAVE_MPI AND PTO_MPIEXEC_IS_OPENMPI)
  foreach(mode coll_frozen coll_frozen_rank)
    set(r 0)
    if(mode STREQUAL "coll_frozen_rank")
      set(r 1)
    endif()
    set(t mpi.node_${mode}.np2)
    add_test(NAME ${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rank_fault.sh ${MPIEXEC_EXECUTABLE}
                               $<TARGET_FILE:test_node_mpi_faults> ${mode} 10
      "pto comm: domain [0-9]+ rank ${r} \\(MPI rank ${r}, pid [0-9]+\\): the 2-rank allreduce.s exchange \\(MPI_Isend/MPI_Irecv\\) on window buffer scratch did not complete by its deadline \\(1 ms\\)"
      "MPI still owns the call.s src and dst .*: ending the MPI job \\(MPI_Abort\\)")
    set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 60 RESOURCE_LOCK pto_devices
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1;PTO_MPI_SHARED_WINDOWS=0;PTO_MPI_COLL_GRACE_MS=500")
  endforeach()
endif()

# `pto run` of a multi-chip scene under mpiexec: one title and one report
# (rank 0's), not one per rank.
if(PTO_HAVE_MPI)
  add_test(NAME mpi.cli_one_title.np2 COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_one_title.sh
                                              ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:pto_cli>)
  set_tests_properties(mpi.cli_one_title.np2 PROPERTIES LABELS mpi TIMEOUT 150 RESOURCE_LOCK pto_devices
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
  # controlled schedules of a node under mpirun, through pto run: the race
  # caught and replayed, correct scenes fuzzed (cli_schedules.sh)
  add_test(NAME mpi.cli_schedules.np2 COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_schedules.sh
                                              ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:pto_cli>)
  set_tests_properties(mpi.cli_schedules.np2 PROPERTIES LABELS mpi TIMEOUT 150 RESOURCE_LOCK pto_devices
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
  # checking mode under mpirun, through pto run --check (cli_check.sh)
  add_test(NAME mpi.cli_check.np2 COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_check.sh
                                          ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:pto_cli>)
  set_tests_properties(mpi.cli_check.np2 PROPERTIES LABELS mpi TIMEOUT 150 RESOURCE_LOCK pto_devices
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
endif()

# A rank that dies mid-kernel while mpirun keeps the job running
# (orte_abort_on_non_zero_status 0, what docs/comm.md recommends for named
# errors): three chips run ring allreduces of 1 Mi f32 and chip 1 calls
# exit(3) (its exit path tells rank 0 the status) or _exit(3) (rank 0 sees
# its process gone): rank 0 names it at once (PTO_ECHIP_DIED), stops and
# joins chip 0's thread before it unmaps a window; or chip 0 calls _exit(3),
# ending rank 0: ranks 1 and 2 see its process gone and end the job, named.
# Every run ends within 10 s: no segmentation fault, no process or object
# of the run left. rank_death.sh runs each mode twice on shared-memory
# windows and once on MPI RMA windows (each run of those takes about 3 s);
# `rank_death.sh mpiexec PROGRAM shm 50` (and rma) is the long run.
if(PTO_HAVE_MPI AND PTO_MPIEXEC_IS_OPENMPI)
  foreach(layout shm rma)
    set(t mpi.node_rank_death_${layout}.np3)
    set(runs 2)
    if(layout STREQUAL "rma")
      set(runs 1)
    endif()
    add_test(NAME ${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rank_death.sh ${MPIEXEC_EXECUTABLE}
                               $<TARGET_FILE:test_node_mpi_faults> ${layout} ${runs})
    set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 120 RESOURCE_LOCK pto_devices
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
  endforeach()
endif()

# ... and rank 0 killed (SIGKILL) by chip 0's kernel at its entry, while
# rank 0's relay may still be sending the task's frames to ranks 1 and 2 (a
# rendezvous: a frame is above the eager limit); before, a rank whose probe
# had matched such a frame waited in its receive for ever (3 of 4 runs on
# RMA windows). Ranks 1 and 2 name rank 0 gone within 10 s, every run; a
# run that hangs fails at 40 s (rank_fault.sh), never the whole test.
if(PTO_HAVE_MPI AND PTO_MPIEXEC_IS_OPENMPI)
  foreach(layout shm rma)
    set(t mpi.node_root_kill_${layout}.np3)
    add_test(NAME ${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rank_death.sh ${MPIEXEC_EXECUTABLE}
                               $<TARGET_FILE:test_node_mpi_faults> ${layout} 4 root_kill)
    set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 240 RESOURCE_LOCK pto_devices
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
  endforeach()
endif()

# ... and chip 1 killed (SIGKILL) with the node's deadlines long (control
# 30 s, waits 40 s), on RMA windows: rank 0 names it within 10 s, 3 runs of
# 3. Before, chip 0's thread, stopped, waited for the dead rank at the
# window's collective release (or inside an MPI call to it) and every run
# ended after 31 s (on shared windows the release did not wait).
if(PTO_HAVE_MPI AND PTO_MPIEXEC_IS_OPENMPI)
  set(t mpi.node_rank_kill_late_rma.np3)
  add_test(NAME ${t} COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rank_death.sh ${MPIEXEC_EXECUTABLE}
                             $<TARGET_FILE:test_node_mpi_faults> rma 3 kill_late)
  set_tests_properties(${t} PROPERTIES LABELS mpi TIMEOUT 240 RESOURCE_LOCK pto_devices
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
endif()

# A program that initialises MPI itself and finalises it at its end
# (tests/mpi/test_node_own_mpi.c): two nodes one after the other, each a
# node-level allreduce over every rank, checked; rank 0's MPI_Finalize
# releases the other ranks, and the job exits 0 (an MPI_Finalize that does
# not return within 20 s fails the program, naming it).
if(PTO_HAVE_MPI)
  add_executable(test_node_own_mpi ${CMAKE_CURRENT_LIST_DIR}/test_node_own_mpi.c)
  target_link_libraries(test_node_own_mpi PRIVATE pto_internal MPI::MPI_C)
  foreach(np 2 4)
    pto_add_mpi_test(NAME node_own_mpi NP ${np} COMMAND test_node_own_mpi TIMEOUT 60
                     RESOURCE_LOCK pto_devices)
  endforeach()
endif()

# Ring shuffle, a node-level allreduce, host data and window reads on 2
# ranks, verified: the program scripts/two_hosts.sh runs with one rank per
# (simulated) host.
if(PTO_HAVE_MPI)
  add_executable(test_node_two_ranks ${CMAKE_CURRENT_LIST_DIR}/test_node_two_ranks.c)
  target_link_libraries(test_node_two_ranks PRIVATE pto_scenes)
  pto_add_mpi_test(NAME node_two_ranks NP 2 COMMAND test_node_two_ranks TIMEOUT 60
                   RESOURCE_LOCK pto_devices)
endif()

# A chip task on another host whose chip function the chip rank refuses:
# the host tensors rank 0 sent after its frame are taken and dropped, and
# the next tasks (host tensors of other sizes) give exact results.
if(PTO_HAVE_MPI)
  add_executable(test_node_ship_refused ${CMAKE_CURRENT_LIST_DIR}/test_node_ship_refused.c)
  target_link_libraries(test_node_ship_refused PRIVATE pto_scenes)
  pto_add_two_hosts_test(NAME node_ship_refused COMMAND test_node_ship_refused
    RESOURCE_LOCK pto_devices PASS "summary: refused=verified next=verified")
endif()

# Checking mode with the two chips on two hosts (cli_check_two_hosts.sh):
# the breaches named by the breaching rank, correct scenes passing.
if(PTO_HAVE_MPI)
  add_test(NAME mpi.cli_check_two_hosts.np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_check_two_hosts.sh ${PROJECT_BINARY_DIR}
                      $<TARGET_FILE:pto_cli>)
  set_tests_properties(mpi.cli_check_two_hosts.np2 PROPERTIES LABELS mpi TIMEOUT 400
    RESOURCE_LOCK "pto_devices;pto_two_hosts" SKIP_RETURN_CODE 2)
endif()

# Two hosts (scripts/two_hosts.sh: network namespaces, own host names, a
# veth pair, Open MPI over TCP with osc/ucx for the windows), one rank each.
# Needs root and ip netns (CI runs as root; where namespaces cannot be made,
# e.g. an unprivileged container, the script says why and exits 2: the test
# is reported not run). Host tensors travel with the task (host_ship.c); a
# domain across the hosts gets MPI RMA windows: ring shuffle and the
# allreduce verified; rank 0 reads chip 0's window and is refused chip 1's,
# named ("across": the program expects the refusal).
if(PTO_HAVE_MPI)
  pto_add_two_hosts_test(NAME node COMMAND test_node_two_ranks across RESOURCE_LOCK pto_devices
    PASS "summary: ring_shuffle=verified allreduce=verified host_data=verified window_read=verified")
endif()

# A build without MPI asked to run under mpirun (the environment mpirun
# sets): PTO_EMPI, "pto was built without MPI: configure pto with
# -DPTO_MPI=ON ...". Built only without MPI (scripts/test.sh's sanitizer
# modes build so).
if(NOT PTO_HAVE_MPI)
  add_executable(test_node_no_mpi ${CMAKE_CURRENT_LIST_DIR}/test_node_no_mpi.c)
  target_link_libraries(test_node_no_mpi PRIVATE pto_internal)
  add_test(NAME dist.node_no_mpi COMMAND test_node_no_mpi)
  set_tests_properties(dist.node_no_mpi PROPERTIES LABELS dist TIMEOUT 60
                       ENVIRONMENT "OMPI_COMM_WORLD_SIZE=2;OMPI_COMM_WORLD_RANK=0")
endif()

# Every comm op of tests/mpi/test_mpi_comm.c (RMA windows: one rank per
# host) across the two hosts of scripts/two_hosts.sh, osc/ucx over TCP, 4
# threads per rank in the store / notify / wait rounds: all checks pass,
# no hang (the RMA calls of a process take turns: src/comm/mpi.c lock()).
if(PTO_HAVE_MPI)
  pto_add_two_hosts_test(NAME ops COMMAND test_mpi_comm ops
                         PASS "ops on 2 ranks: ok \\(0 failed checks\\)")
endif()

# The acceptance scenes (the eight 2-chip ones; scene 10 needs 3 chips) and
# scene 11's collectives at 2 ranks (the 4-chip node-level case is listed as
# not run) with their two chips on the two hosts: windows are MPI RMA windows.
if(PTO_HAVE_MPI)
  foreach(t dist_scenes dist_coll)
    pto_add_two_hosts_test(NAME ${t} COMMAND test_${t} RESOURCE_LOCK pto_devices
                           PASS "\\[  PASSED  \\] 8 test\\(s\\)")
  endforeach()
  # ... and scene 11's calls past 32 KiB on MPI's collectives there too (between 2 ranks
  # on two hosts the records carry up to 1 MiB, which every size of scene 11 fits)
  pto_add_two_hosts_test(NAME dist_coll_mpi COMMAND test_dist_coll RESOURCE_LOCK pto_devices
                         PASS "\\[  PASSED  \\] 8 test\\(s\\)"
                         ENVIRONMENT PTO_MPI_RECORD_BYTES=32768)
  set_tests_properties(mpi.dist_scenes_two_hosts.np2 mpi.dist_coll_two_hosts.np2
    mpi.dist_coll_mpi_two_hosts.np2 PROPERTIES FAIL_REGULAR_EXPRESSION "\\[  FAILED  \\]")
endif()

# Controlled schedules of a node whose chips are MPI ranks
# (tests/mpi/test_node_mpi_schedule.c): correct scenes under seeds, a
# correct program recorded and replayed to the same files on every rank,
# the seed's race caught and replayed 20 of 20, departures named by rank,
# file and line; on shared-memory windows and on MPI RMA windows.
if(PTO_HAVE_MPI)
  add_executable(test_node_mpi_schedule ${CMAKE_CURRENT_LIST_DIR}/test_node_mpi_schedule.c)
  target_link_libraries(test_node_mpi_schedule PRIVATE pto_scenes)
  pto_add_mpi_test(NAME node_schedule NP 2 COMMAND test_node_mpi_schedule TIMEOUT 120
                   RESOURCE_LOCK pto_devices)
  pto_add_mpi_test(NAME node_schedule_rma NP 2 COMMAND test_node_mpi_schedule TIMEOUT 120
                   RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)
endif()

# A chip of a group task that fails cancels the task on its group's other
# chips at once under mpirun too: rank 0's relay forwards the cancel, the
# chip rank's relay puts it into its mailbox (docs/node.md, "Deadlines and
# failure"); on shared windows and on MPI RMA windows, each chip a rank.
pto_add_mpi_test(NAME node_group_failure NP 3 COMMAND test_node_group_failure TIMEOUT 120
                 RESOURCE_LOCK pto_devices)
pto_add_mpi_test(NAME node_group_failure_rma NP 3 COMMAND test_node_group_failure TIMEOUT 120
                 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)

# A node run cancelled (pto_node_cancel) under mpirun, chip 1 a rank of its
# own: rank 0's relay forwards the cancel word, which ends chip 1's signal
# wait and turns pto_kctx_cancelled true in its computing kernels
# (tests/dist/test_node_orch.c, test_cancel_a_run and
# test_cancel_polling_kernels); on shared and on MPI RMA windows.
pto_add_mpi_test(NAME node_cancel NP 2 COMMAND test_node_orch "test_cancel_*" TIMEOUT 120
                 RESOURCE_LOCK pto_devices)
pto_add_mpi_test(NAME node_cancel_rma NP 2 COMMAND test_node_orch "test_cancel_*" TIMEOUT 120
                 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)

# A node that fails under mpirun (a task outlives task_timeout_ms) stops
# chip 0, a thread of rank 0: its kernels that poll pto_kctx_cancelled see
# it and end, so the failed run returns at once (tests/dist/test_node_orch.c,
# test_stop_polling_kernels; before, 2000 ms: the failed node waited for
# them). The failed node's destroy ends the job (MPI_Abort): the test says
# "verified" before it.
pto_add_mpi_test(NAME node_stop NP 2 COMMAND test_node_orch "test_stop_*" TIMEOUT 120
                 RESOURCE_LOCK pto_devices)
if(PTO_HAVE_MPI)
  set_tests_properties(mpi.node_stop.np2 PROPERTIES PASS_REGULAR_EXPRESSION
                       "node stop under mpirun: chip 0's polling kernels saw it: verified")
endif()

# A node runs again right after a failed run (a chip failing between two
# allreduces or in a barrier, a host task failing, a chip outliving its
# watchdog, a failed group task then a good one in the same run): exact
# sums, promptly, in runs of other shapes; through the relays, each chip a
# rank, on shared and on MPI RMA windows.
pto_add_mpi_test(NAME node_rerun NP 3 COMMAND test_node_rerun TIMEOUT 120
                 RESOURCE_LOCK pto_devices)
pto_add_mpi_test(NAME node_rerun_rma NP 3 COMMAND test_node_rerun TIMEOUT 120
                 RESOURCE_LOCK pto_devices ENVIRONMENT PTO_MPI_SHARED_WINDOWS=0)

# A thread a node under mpirun cannot start (tests/mpi/test_node_mpi_threads.c,
# linked with pthread_create wrapped so that the chosen call fails): rank 0's
# relay thread, chip 0's thread (a thread of rank 0) and rank 1's relay
# thread are each named with pthread_create's error in the reason the job
# ends with (MPI_Abort, on rank 0's stderr).
if(PTO_HAVE_MPI)
  add_executable(test_node_mpi_threads ${CMAKE_CURRENT_LIST_DIR}/test_node_mpi_threads.c)
  target_link_libraries(test_node_mpi_threads PRIVATE pto_internal MPI::MPI_C)
  target_link_options(test_node_mpi_threads PRIVATE -Wl,--wrap=pthread_create)
  set(why "pthread_create: Resource temporarily unavailable")
  set(want_relay "MPI_Abort.: node under mpirun: cannot start the relay thread: ${why}")
  set(want_chip0 "MPI_Abort.: cannot start the thread of chip rank 0: ${why}")
  set(want_rank "MPI_Abort.: chip rank 1 .MPI rank 1 on host [^ ]+, device 124, pid [0-9]+. failed to start .chip creation or chip_init failed.: cannot start the relay thread: ${why}")
  foreach(mode relay chip0 rank)
    pto_add_mpi_test(NAME node_thread_${mode} NP 2 COMMAND test_node_mpi_threads ${mode}
                     TIMEOUT 60 RESOURCE_LOCK pto_devices)
    set_tests_properties(mpi.node_thread_${mode}.np2 PROPERTIES PASS_REGULAR_EXPRESSION
                         "${want_${mode}}")
  endforeach()
endif()
