# CMake toolchain file for distributable builds: libraries that load on glibc 2.28 and later (manylinux_2_28), with
# no libstdc++ dependency. manylinux_2_28_c++ beside this file says how and why; it needs zig (pip install ziglang).
#
#   cmake -S . -B build -DCMAKE_TOOLCHAIN_FILE="$(python -m torchtrt_plugins sdk --cmake-dir)/manylinux_2_28.cmake"
#
# torchtrt_plugins' wheel builds its prebuilt libraries with it (setup.py); a user's ops built with the SDK's CMake
# package (torchtrt_plugins_add_library) take it the same way.
set(_ttp_manylinux_cxx "${CMAKE_CURRENT_LIST_DIR}/manylinux_2_28_c++")
execute_process(COMMAND "${_ttp_manylinux_cxx}" --zig RESULT_VARIABLE _ttp_status ERROR_VARIABLE _ttp_error
  OUTPUT_QUIET)
if(NOT _ttp_status EQUAL 0)
  message(FATAL_ERROR "manylinux_2_28.cmake: ${_ttp_error}")
endif()
set(CMAKE_CXX_COMPILER "${_ttp_manylinux_cxx}")
set(CMAKE_CUDA_HOST_COMPILER "${_ttp_manylinux_cxx}")
