# Installation of mote: the library, the public headers, a CMake package
# (find_package(mote CONFIG)) and a pkg-config file (mote.pc).
#
# Included at the end of the top-level CMakeLists.txt, after src/ has defined
# the `mote` target and set MOTE_HAVE_HWLOC.

option(MOTE_INSTALL "Generate the install rules for mote" ${MOTE_IS_TOP_LEVEL})
if(NOT MOTE_INSTALL)
  return()
endif()

include(CMakePackageConfigHelpers)

set(MOTE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/mote"
    CACHE STRING "Where mote-config.cmake goes, relative to the prefix")

set(MOTE_INSTALL_TARGETS mote)
if(MOTE_MPI)
  list(APPEND MOTE_INSTALL_TARGETS mote_mpi)  # task-aware MPI, mote::mote_mpi
endif()
install(TARGETS ${MOTE_INSTALL_TARGETS}
  EXPORT moteTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The one public include root: mote.h and mote/ (with mote/detail/, which the
# inline fast paths need).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

install(EXPORT moteTargets
  NAMESPACE mote::
  FILE mote-targets.cmake
  DESTINATION ${MOTE_INSTALL_CMAKEDIR})

# hwloc is a private dependency: a shared libmote carries it in its own
# DT_NEEDED, but a static libmote.a leaves it to the consumer's link, so the
# package config must find it again (the exported link interface names the
# imported target PkgConfig::HWLOC).
if(BUILD_SHARED_LIBS)
  set(MOTE_CONFIG_SHARED ON)
else()
  set(MOTE_CONFIG_SHARED OFF)
endif()
set(MOTE_CONFIG_HWLOC ${MOTE_HAVE_HWLOC})
set(MOTE_CONFIG_MPI ${MOTE_MPI})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/mote-config.cmake.in
  ${PROJECT_BINARY_DIR}/mote-config.cmake
  INSTALL_DESTINATION ${MOTE_INSTALL_CMAKEDIR})
# Before 1.0 a minor release may break the ABI, so only the same minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/mote-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/mote-config.cmake
  ${PROJECT_BINARY_DIR}/mote-config-version.cmake
  DESTINATION ${MOTE_INSTALL_CMAKEDIR})

# pkg-config. The prefix is found from the .pc file's own place (${pcfiledir}),
# so `cmake --install --prefix DIR` and a moved tree both stay correct.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MOTE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH MOTE_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" MOTE_PC_UP "${MOTE_PC_UP}")
  set(MOTE_PC_PREFIX "\${pcfiledir}/${MOTE_PC_UP}")
endif()
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(MOTE_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(MOTE_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
if(BUILD_SHARED_LIBS)
  # MOTE_SHARED is a PUBLIC definition: it turns MOTE_API into an export
  # attribute, which the inline code in the headers relies on.
  set(MOTE_PC_CFLAGS "-DMOTE_SHARED")
  set(MOTE_PC_LIBS "")
  set(MOTE_PC_LIBS_PRIVATE "-pthread")
  set(MOTE_PC_REQUIRES "")
else()
  # A static archive needs its own dependencies on every link, not only with
  # `pkg-config --static`, so they go in Libs and Requires.
  set(MOTE_PC_CFLAGS "")
  set(MOTE_PC_LIBS "-pthread")
  set(MOTE_PC_LIBS_PRIVATE "")
  set(MOTE_PC_REQUIRES "")
  if(MOTE_HAVE_HWLOC)
    set(MOTE_PC_REQUIRES "hwloc")
  endif()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/mote.pc.in ${PROJECT_BINARY_DIR}/mote.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mote.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
