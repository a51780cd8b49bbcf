# The programs of bench/ that measure pto alone (no peer system needed),
# built with the library into build/bench/ (bench/README.md):
#   idle_cores_bench   a task's cost as the chip grows (8 to 4096 clusters)
#   run_bench          what a run's start and end cost
#   submit_bench       what a submit costs, all threads on one CPU
#   node_chips_bench   a node task's cost on nodes of 1 to 16 chips
#   graph_bench        a captured graph's launch against the dynamic run
foreach(p idle_cores_bench run_bench submit_bench node_chips_bench)
  add_executable(${p} ${CMAKE_CURRENT_LIST_DIR}/${p}.c)
  target_link_libraries(${p} PRIVATE pto_static)
endforeach()
add_executable(graph_bench ${CMAKE_CURRENT_LIST_DIR}/graph_bench.c)
target_link_libraries(graph_bench PRIVATE pto_scenes pto_internal m)
foreach(p idle_cores_bench run_bench submit_bench node_chips_bench graph_bench)
  target_compile_definitions(${p} PRIVATE _GNU_SOURCE) # clock_gettime, nanosleep under -std=c11
  set_target_properties(${p} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endforeach()
