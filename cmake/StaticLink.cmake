# DSC_STATIC_LINK: dsc-run, dsc-translate and the tests carry MLIR, LLVM,
# OpenBLAS, OpenMP and the C++ runtime inside them, so they run on a machine
# that has only glibc, the NVIDIA driver and CUDA's runtime libraries (NVRTC
# stays shared and cuBLASLt is loaded at run time: the GPU node has its own,
# matching its driver).
#
# Debian builds MLIR and LLVM as one shared library each; its exported
# targets for the component archives (libMLIRIR.a, ...) still name the
# shared `LLVM` in their link interfaces. This file points those interfaces
# at LLVM's component archives instead, and sets DSC_MLIR_LIBS to the MLIR
# archives the project uses (the shared `MLIR` otherwise).

# The MLIR component libraries dsc's code calls into; their dependencies
# follow through the link interfaces.
set(DSC_MLIR_LIBS
  MLIROptLib MLIRParser MLIRPass MLIRTransforms MLIRTransformUtils
  MLIRFuncDialect MLIRIR MLIRSupport)

# add_llvm_executable links the shared LLVM when this is on.
set(LLVM_LINK_LLVM_DYLIB OFF)

# LLVMSupport's exported interface names the shared z3, zlib and zstd (for
# the SMT solver and compressed sections, which dsc never calls): link
# only what the archives actually need.
set_target_properties(LLVMSupport PROPERTIES
  INTERFACE_LINK_LIBRARIES "LLVMDemangle;Threads::Threads;rt;dl;m")
find_package(Threads REQUIRED)

# Replace `LLVM` (shared) with LLVMSupport in every MLIR target reachable
# from DSC_MLIR_LIBS.
function(dsc_relink_mlir_static target)
  get_property(done GLOBAL PROPERTY DSC_RELINKED_${target})
  if(done OR NOT TARGET ${target})
    return()
  endif()
  set_property(GLOBAL PROPERTY DSC_RELINKED_${target} ON)
  get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT deps)
    return()
  endif()
  list(TRANSFORM deps REPLACE "^LLVM$" "LLVMSupport")
  list(REMOVE_DUPLICATES deps)
  set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
  foreach(dep ${deps})
    if(dep MATCHES "^MLIR")
      dsc_relink_mlir_static(${dep})
    endif()
  endforeach()
endfunction()
foreach(lib ${DSC_MLIR_LIBS})
  dsc_relink_mlir_static(${lib})
endforeach()

# OpenBLAS's archive (the pthread variant Debian's libopenblas-dev installs).
find_library(OPENBLAS_LIBRARY NAMES libopenblas.a REQUIRED
             PATHS /usr/lib/x86_64-linux-gnu/openblas-pthread NO_DEFAULT_PATH)

# The C++ runtime and libgomp inside the binaries too.
add_link_options(-static-libstdc++ -static-libgcc)
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libgomp.a
                OUTPUT_VARIABLE DSC_GOMP_ARCHIVE OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT IS_ABSOLUTE "${DSC_GOMP_ARCHIVE}")
  message(FATAL_ERROR "DSC_STATIC_LINK: the compiler has no libgomp.a")
endif()
set_target_properties(OpenMP::OpenMP_CXX PROPERTIES
  INTERFACE_LINK_LIBRARIES "${DSC_GOMP_ARCHIVE};Threads::Threads;dl")
