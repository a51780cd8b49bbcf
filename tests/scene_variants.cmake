# Scenes that also run with other chip shapes: pto_scene_variant(NAME ARGS...)
function(pto_scene_variant name)
  string(REPLACE ";" "" suffix "${ARGN}")
  string(REPLACE "--" "_" suffix "${suffix}")
  add_test(NAME scene.${name}${suffix} COMMAND pto_cli run ${name} ${ARGN})
  set_tests_properties(scene.${name}${suffix} PROPERTIES LABELS scene TIMEOUT 300)
endfunction()

# Gang start (sync_start): every scene with 1, 2, 3 and 4 schedulers, so the
# fast path, the drain with one participant and the drain tree of 2-4 all run.
foreach(scene sync_normal sync_aiv sync_edge sync_stress sync_spill sync_starvation sync_retry
        sync_barrier)
  foreach(ns 1 2 3 4)
    pto_scene_variant(${scene} --schedulers ${ns})
  endforeach()
endforeach()
