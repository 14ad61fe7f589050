# CMake package of torchtrt_plugins' C++ SDK: build the plugin library of ops declared with torchtrt_plugins.declare
# from your kernel launchers, as torchtrt_plugins.sdk.PluginLibrary builds it (same sources, flags and exports: both
# read ../sdk_build.json; torchtrt_plugins_recipe.cmake, which torchtrt_plugins' own CMakeLists.txt includes too, is
# where CMake reads it).
#
#   cmake -S . -B build -Dtorchtrt_plugins_DIR="$(python -m torchtrt_plugins sdk --cmake-dir)"
#
#   find_package(torchtrt_plugins REQUIRED)
#   torchtrt_plugins_add_library(myops MODULE myops SOURCES myops/csrc/myops.cu PYTHONPATH ${CMAKE_CURRENT_SOURCE_DIR})
#
# torchtrt_plugins_add_library(<name> MODULE <module> SOURCES <launcher sources>...
#                              [INCLUDE_DIRECTORIES <dirs>...] [PYTHONPATH <dirs>...])
#   <name> is the name of the sdk.PluginLibrary the ops of the Python module <module> are declared on. At build time
#   `python -m torchtrt_plugins sdk generate` writes the op tables and the fields header (op_fields.h: the index
#   constants launchers read LaunchArgs::scalars by, e.g. myops::fields::scaled_add::kALPHA) from the declarations
#   (rerun when a file of <module>'s package or of torchtrt_plugins that it imported changes); then two targets:
#     <name>_plugins    lib<name>_plugins.so: the TensorRT plugin library (links the CUDA runtime only, exports only
#                       getCreators and setLoggerFinder): trtexec --dynamicPlugins, plugins_to_serialize, load_library;
#     <name>_launchers  lib<name>_launchers.so: the launchers behind the C entry points the op's eager kernel calls;
#   the launcher sources are compiled once (OBJECT library <name>_launcher_objects) into both.
#
# Also provides: torchtrt_plugins::sdk (INTERFACE: the SDK headers, e.g. sdk/ttp_sdk.h, the launcher ABI);
# TORCHTRT_PLUGINS_PYTHON (the interpreter with this torchtrt_plugins: Python_EXECUTABLE / Python3_EXECUTABLE when
# set, else FindPython3, which prefers an active virtual environment); TORCHTRT_PLUGINS_INCLUDE_DIR;
# TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR (TensorRT 10.x/11.x headers found by the Python package's own search:
# -DTENSORRT_INCLUDE_DIR, -DTENSORRT_ROOT, the same environment variables, then the system folders).
if(CMAKE_VERSION VERSION_LESS 3.24)
  message(FATAL_ERROR "torchtrt_plugins: the SDK's CMake package needs CMake 3.24 or newer, this is ${CMAKE_VERSION}")
endif()
get_property(_ttp_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
foreach(_ttp_language IN ITEMS CXX CUDA)
  if(NOT _ttp_language IN_LIST _ttp_languages)
    enable_language(${_ttp_language})
  endif()
endforeach()
include(CMakeFindDependencyMacro)
find_dependency(CUDAToolkit)
include("${CMAKE_CURRENT_LIST_DIR}/torchtrt_plugins_recipe.cmake")

get_property(_ttp_configured GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON SET)
if(NOT _ttp_configured)
  if(NOT TORCHTRT_PLUGINS_PYTHON)
    if(Python_EXECUTABLE)
      set(_ttp_python "${Python_EXECUTABLE}")
    elseif(Python3_EXECUTABLE)
      set(_ttp_python "${Python3_EXECUTABLE}")
    else()
      find_package(Python3 REQUIRED COMPONENTS Interpreter)
      set(_ttp_python "${Python3_EXECUTABLE}")
    endif()
    set(TORCHTRT_PLUGINS_PYTHON "${_ttp_python}" CACHE FILEPATH
      "Python interpreter with torchtrt_plugins installed (generates the op tables)")
  endif()
  # The TensorRT headers: a CMake variable wins over the environment; the search itself is the Python package's.
  set(_ttp_env)
  if(TENSORRT_INCLUDE_DIR)
    set(_ttp_env "TENSORRT_INCLUDE_DIR=${TENSORRT_INCLUDE_DIR}")
  elseif(TENSORRT_ROOT)
    set(_ttp_env --unset=TENSORRT_INCLUDE_DIR "TENSORRT_ROOT=${TENSORRT_ROOT}")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${_ttp_env}
      ${TORCHTRT_PLUGINS_PYTHON} -m torchtrt_plugins sdk --cmake-dir --tensorrt-include-dir
    RESULT_VARIABLE _ttp_status OUTPUT_VARIABLE _ttp_out ERROR_VARIABLE _ttp_err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _ttp_status EQUAL 0)
    message(FATAL_ERROR "torchtrt_plugins: `${TORCHTRT_PLUGINS_PYTHON} -m torchtrt_plugins sdk --cmake-dir "
      "--tensorrt-include-dir` failed (status ${_ttp_status}):\n${_ttp_err}\nThe generator needs the Python "
      "interpreter this package belongs to (set -DTORCHTRT_PLUGINS_PYTHON=...) and the TensorRT headers (set "
      "-DTENSORRT_INCLUDE_DIR=... or -DTENSORRT_ROOT=...).")
  endif()
  string(REPLACE "\n" ";" _ttp_out "${_ttp_out}")
  list(GET _ttp_out 0 _ttp_python_cmake_dir)
  list(GET _ttp_out 1 _ttp_tensorrt_include_dir)
  file(REAL_PATH "${_ttp_python_cmake_dir}" _ttp_python_cmake_dir)
  file(REAL_PATH "${CMAKE_CURRENT_LIST_DIR}" _ttp_cmake_dir)
  if(NOT _ttp_python_cmake_dir STREQUAL _ttp_cmake_dir)
    message(FATAL_ERROR "torchtrt_plugins: ${TORCHTRT_PLUGINS_PYTHON} imports a torchtrt_plugins whose CMake package "
      "is ${_ttp_python_cmake_dir}, not this one (${_ttp_cmake_dir}): set -DTORCHTRT_PLUGINS_PYTHON= to the Python "
      "that `-Dtorchtrt_plugins_DIR=$(python -m torchtrt_plugins sdk --cmake-dir)` ran")
  endif()
  # Functions and targets may be used in other directories than find_package's: keep the results global.
  set_property(GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON "${TORCHTRT_PLUGINS_PYTHON}")
  set_property(GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR "${_ttp_tensorrt_include_dir}")
  message(STATUS "torchtrt_plugins SDK: ${_ttp_recipe_include_dir}; TensorRT headers: ${_ttp_tensorrt_include_dir}; "
    "Python: ${TORCHTRT_PLUGINS_PYTHON}")
endif()
get_property(TORCHTRT_PLUGINS_PYTHON GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON)
get_property(TORCHTRT_PLUGINS_INCLUDE_DIR GLOBAL PROPERTY _TORCHTRT_PLUGINS_INCLUDE_DIR)
get_property(TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR)
function(torchtrt_plugins_add_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "MODULE" "SOURCES;INCLUDE_DIRECTORIES;PYTHONPATH")
  set(usage "torchtrt_plugins_add_library(<name> MODULE <python module> SOURCES <launcher sources>... "
    "[INCLUDE_DIRECTORIES <dirs>...] [PYTHONPATH <dirs>...])")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "torchtrt_plugins_add_library(${name}): unexpected arguments ${arg_UNPARSED_ARGUMENTS}; "
      ${usage})
  endif()
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "torchtrt_plugins_add_library: <name> must be an identifier (the sdk.PluginLibrary's name), "
      "got '${name}'")
  endif()
  if(NOT arg_MODULE OR NOT arg_SOURCES)
    message(FATAL_ERROR "torchtrt_plugins_add_library(${name}): MODULE (the Python module whose import declares the "
      "ops on PluginLibrary(\"${name}\", ...)) and SOURCES (the launcher sources) are required: " ${usage})
  endif()
  get_property(python GLOBAL PROPERTY _TORCHTRT_PLUGINS_PYTHON)
  get_property(tensorrt_include_dir GLOBAL PROPERTY _TORCHTRT_PLUGINS_TENSORRT_INCLUDE_DIR)
  set(pythonpath ${arg_PYTHONPATH})
  if(DEFINED ENV{PYTHONPATH})
    list(APPEND pythonpath "$ENV{PYTHONPATH}")
  endif()
  _torchtrt_plugins_add_declared_library(${name} ${arg_MODULE} "${python}" "${pythonpath}" "${tensorrt_include_dir}"
    "${arg_SOURCES}" "${arg_INCLUDE_DIRECTORIES}")
endfunction()
