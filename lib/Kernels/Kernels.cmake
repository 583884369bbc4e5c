# The kernels, grouped by family. A family's directory holds side by side
# its CPU kernels and their dispatch (<Family>Cpu.cpp, compiled into
# DscRuntime), its CUDA device templates (<Family>.cuh) and its CUDA emit
# logic (<Family>Emit.cpp, compiled into DscCudaEmitter). Common/ holds what
# the families share. Included by lib/Runtime and lib/Codegen.
set(DSC_KERNELS_DIR ${CMAKE_CURRENT_LIST_DIR})

set(DSC_KERNELS_CPU_SOURCES
  ${DSC_KERNELS_DIR}/Common/CommonCpu.cpp
  ${DSC_KERNELS_DIR}/Elementwise/ElementwiseCpu.cpp
  ${DSC_KERNELS_DIR}/Norms/NormsCpu.cpp
  ${DSC_KERNELS_DIR}/Attention/AttentionCpu.cpp
  ${DSC_KERNELS_DIR}/EmbeddingLoss/EmbeddingLossCpu.cpp
  ${DSC_KERNELS_DIR}/Optimizers/OptimizersCpu.cpp
  ${DSC_KERNELS_DIR}/Compression/CompressionCpu.cpp
  ${DSC_KERNELS_DIR}/Gated/GatedCpu.cpp
  ${DSC_KERNELS_DIR}/Rotary/RotaryCpu.cpp
  ${DSC_KERNELS_DIR}/Gemm/GemmCpu.cpp
)

set(DSC_KERNELS_EMIT_SOURCES
  ${DSC_KERNELS_DIR}/Common/CommonEmit.cpp
  ${DSC_KERNELS_DIR}/Elementwise/ElementwiseEmit.cpp
  ${DSC_KERNELS_DIR}/Norms/NormsEmit.cpp
  ${DSC_KERNELS_DIR}/Attention/AttentionEmit.cpp
  ${DSC_KERNELS_DIR}/EmbeddingLoss/EmbeddingLossEmit.cpp
  ${DSC_KERNELS_DIR}/Optimizers/OptimizersEmit.cpp
  ${DSC_KERNELS_DIR}/Compression/CompressionEmit.cpp
  ${DSC_KERNELS_DIR}/Gated/GatedEmit.cpp
  ${DSC_KERNELS_DIR}/Rotary/RotaryEmit.cpp
)

# The CUDA device library, pasted into every emitted translation unit: these
# files concatenated in this order, separated by blank lines. Common first:
# every other piece uses its helpers.
set(DSC_KERNELS_CUDA_LIBRARY
  ${DSC_KERNELS_DIR}/Common/Common.cuh
  ${DSC_KERNELS_DIR}/Elementwise/Elementwise.cuh
  ${DSC_KERNELS_DIR}/Norms/Norms.cuh
  ${DSC_KERNELS_DIR}/Attention/Attention.cuh
  ${DSC_KERNELS_DIR}/EmbeddingLoss/EmbeddingLoss.cuh
  ${DSC_KERNELS_DIR}/Optimizers/Optimizers.cuh
  ${DSC_KERNELS_DIR}/Compression/Compression.cuh
  ${DSC_KERNELS_DIR}/Gated/Gated.cuh
  ${DSC_KERNELS_DIR}/Rotary/Rotary.cuh
  ${DSC_KERNELS_DIR}/Gemm/Gemm.cuh
)
