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
