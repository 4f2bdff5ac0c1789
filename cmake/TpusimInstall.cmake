# `cmake --install build --prefix DIR` installs the libraries, their headers (and the generated
# protobuf headers), the tpusim CLI and a CMake package, so that a user's program links in one
# line (examples/standalone/CMakeLists.txt):
#
#   find_package(tpusim REQUIRED)
#   target_link_libraries(my_model PRIVATE tpusim::estimator)
#
# Each library installs as tpusim::<name>, the same name the build tree's alias gives it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TPUSIM_INSTALLED_LIBRARIES
  common config_proto config perfetto_proto xplane_proto traces isa_proto numerics sim example_proto
  graph_proto data graph zoo onnx backend_api backend_cpu backend_gpu lowering backend_tpusim registry
  infeed opcheck runtime estimator_proto estimator jobs)
set(tpusim_install_targets)
foreach(name ${TPUSIM_INSTALLED_LIBRARIES})
  set_target_properties(tpusim_${name} PROPERTIES EXPORT_NAME ${name})
  list(APPEND tpusim_install_targets tpusim_${name})
endforeach()
install(TARGETS ${tpusim_install_targets} EXPORT tpusimTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tpusim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(floor common configs traces sim runtime estimator)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${floor} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY ${TPUSIM_GEN_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.pb.h")
install(EXPORT tpusimTargets NAMESPACE tpusim::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpusim)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tpusimConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tpusimConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpusim)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tpusimConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tpusimConfig.cmake
  ${PROJECT_BINARY_DIR}/tpusimConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpusim)
