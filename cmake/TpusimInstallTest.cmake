# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK=... [-DCXX_COMPILER=... -DCXX_FLAGS=...
# -DLINK_FLAGS=...] -P TpusimInstallTest.cmake: installs the
# build into WORK/prefix, builds examples/standalone (a user's project: find_package(tpusim),
# one target_link_libraries) against it in WORK/build, and runs its custom_model for a few steps
# on the cpu backend. Fails, with the step's output, at the first step that does.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
run_step("configure the standalone project" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/standalone
  -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release
  # The build's own compiler and flags: a sanitizer build's static libraries need its runtime.
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
run_step("build the standalone project" ${CMAKE_COMMAND} --build ${WORK}/build)
run_step("run custom_model" ${WORK}/build/custom_model --steps 10 --backend cpu --work ${WORK}/run)
if(NOT step_output MATCHES "trained 10 steps on cpu")
  message(FATAL_ERROR "custom_model said:\n${step_output}")
endif()
message(STATUS "${step_output}")
